def pytest_configure(config):
    config.addinivalue_line("markers", "conformance: a case of ONNX's backend node test suite")
