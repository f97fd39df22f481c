// Times an ONNX model in ONNX Runtime (CPU), for the comparison scripts (bench/ort.py):
//   node bench/ort_run.js model.onnx runs input0.f32 dim0,dim1,... [input1.f32 dims ...]
// (the model's inputs in order) prints the median run time in milliseconds. Needs
// `npm install --ignore-scripts onnxruntime-node` (make bench does it in bench/).
const fs = require("fs");
const ort = require("onnxruntime-node");

async function main() {
  const [model, runs, ...inputs] = process.argv.slice(2);
  const session = await ort.InferenceSession.create(model, { executionProviders: ["cpu"] });
  const feeds = {};
  for (let i = 0; i < inputs.length / 2; i++) {
    const buf = fs.readFileSync(inputs[2 * i]);
    const data = new Float32Array(buf.buffer, buf.byteOffset, buf.byteLength / 4);
    feeds[session.inputNames[i]] = new ort.Tensor("float32", data, inputs[2 * i + 1].split(",").map(Number));
  }
  await session.run(feeds);  // warm up
  const times = [];
  for (let i = 0; i < Number(runs); i++) {
    const t0 = process.hrtime.bigint();
    await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  times.sort((a, b) => a - b);
  console.log(times[Math.floor(times.length / 2)].toFixed(3));
}
main().catch((e) => { console.error(e.message); process.exit(1); });
