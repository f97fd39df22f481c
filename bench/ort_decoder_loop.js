// ONNX Runtime (CPU) running a decoder step in a loop, for bench/decoder_loop.py:
//   node bench/ort_decoder_loop.js model.onnx steps x.f32 dims cache_dims
// The step's inputs are x (the same each step) and the key and value caches, empty at first
// ([..., 0, ...] as cache_dims gives them) and then the step's own new caches (its outputs 1
// and 2). Prints a JSON line: the loop's total milliseconds and each step's.
const fs = require("fs");
const ort = require("onnxruntime-node");

async function main() {
  const [model, steps, xPath, xDims, cacheDims] = process.argv.slice(2);
  const session = await ort.InferenceSession.create(model, { executionProviders: ["cpu"] });
  const buf = fs.readFileSync(xPath);
  const x = new ort.Tensor("float32", new Float32Array(buf.buffer, buf.byteOffset, buf.byteLength / 4), xDims.split(",").map(Number));
  const empty = () => new ort.Tensor("float32", new Float32Array(0), cacheDims.split(",").map(Number));
  const [xName, kName, vName] = session.inputNames;
  const [, kOut, vOut] = session.outputNames;
  const times = [];
  let k = empty(), v = empty();
  const start = process.hrtime.bigint();
  for (let t = 0; t < Number(steps); t++) {
    const t0 = process.hrtime.bigint();
    const out = await session.run({ [xName]: x, [kName]: k, [vName]: v });
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
    k = out[kOut];
    v = out[vOut];
  }
  const total = Number(process.hrtime.bigint() - start) / 1e6;
  console.log(JSON.stringify({ total_ms: total, step_ms: times }));
}
main().catch((e) => { console.error(e.message); process.exit(1); });
