"""Tests read a model's figures from its record of facts (stats() in Python, Model::facts() in
C++, esg_model_facts in C), not from its report: the report is for people and its wording may
change. A few lines may check that the report renders the record; beyond that, a test that
searches report text fails here, naming the lines."""
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MOST = 5  # lines that may read report text, the whole suite over

# What a line reads the report through: Python's report(), C++'s Model::report(), C's
# esg_model_report, or a variable holding what one of them returned.
REPORT = re.compile(r"\breport\b")
SEARCH = re.compile(r"\bin\b|\bnot in\b|re\.(search|findall|match|fullmatch)\(|\.find\(|\.count\(|\bstrstr\(|\.rfind\(")
COMMENT = re.compile(r"^\s*(#|//|/?\*)")


def reads_report(line: str) -> bool:
    """Whether a line of a test searches report text: it names a report and applies a search."""
    code = line.split("#", 1)[0] if line.lstrip().startswith(("assert", "if", "return")) else line
    return not COMMENT.match(line) and bool(REPORT.search(code)) and bool(SEARCH.search(code)) and '"""' not in code


def test_the_detector_tells_a_report_search_from_other_lines():
    assert reads_report('    assert "views: 1 reshapes" in model.report()')
    assert reads_report('    kept = re.search(r"plans: (\\d+) kept", model.report())')
    assert reads_report('  CHECK(m.report().find("no plan yet") != std::string::npos);')
    assert reads_report('  CHECK(report && strstr(report, "arena") != NULL);')
    assert not reads_report('    assert model.stats()["views"] == 1')
    assert not reads_report('    print(model.report())')
    assert not reads_report('# the report in words: for people')
    assert not reads_report('  // what the report says in passing')


def test_at_most_a_few_test_lines_read_report_text():
    found = []
    for path in sorted((REPO / "tests").rglob("*")):
        if path.suffix not in {".py", ".cpp", ".c"} or {"compat", "ascend_sim"} & set(path.relative_to(REPO / "tests").parts):
            continue
        if path == Path(__file__).resolve():
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if reads_report(line):
                found.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert len(found) <= MOST, "tests that search report text (assert on the model's facts instead):\n" + "\n".join(found)
