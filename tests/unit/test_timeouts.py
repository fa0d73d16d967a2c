"""No test of the CI tiers plans on waiting longer than CI could (tests/support/budget.py):
every `timeout=` given to a call, and every default of a parameter named `timeout`, that is
a number (or a product or sum of numbers) is at most LONGEST_WAIT, in the integration and
Spack tiers and what they import from tests/support and the test beds. The nightly tier
(tests/nightly, outside CI) may wait hours."""
import ast

from iostack.core import paths
from support import budget

CI_TREES = ["tests/integration", "tests/spack", "tests/support", "tools/testbed"]


def _number(node: ast.AST) -> float | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
            and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Add)):
        left, right = _number(node.left), _number(node.right)
        if left is not None and right is not None:
            return left * right if isinstance(node.op, ast.Mult) else left + right
    return None


def planned_waits(source: str) -> list[tuple[int, float]]:
    """(line, seconds) of each numeric timeout in `source`."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            out += [(k.value.lineno, n) for k in node.keywords
                    if k.arg == "timeout" and (n := _number(k.value)) is not None]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            positional = args.posonlyargs + args.args
            pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults, strict=True))
            pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None]
            out += [(d.lineno, n) for a, d in pairs
                    if a.arg == "timeout" and (n := _number(d)) is not None]
    return out


def test_the_scan_finds_a_planned_hour_in_each_form():
    source = ("def run(cmd, timeout=3600): ...\n"
              "def go(*, timeout: float = 2 * 1800): ...\n"
              "subprocess.run(cmd, timeout=60 * 60 + 1)\n"
              "subprocess.run(cmd, timeout=t)\n")
    assert sorted(planned_waits(source)) == [(1, 3600), (2, 3600), (3, 3601)]


def test_no_ci_tier_test_waits_longer_than_ci_could():
    over = []
    for tree in CI_TREES:
        for f in sorted((paths.REPO / tree).rglob("*.py")):
            for line, seconds in planned_waits(f.read_text()):
                if seconds > budget.LONGEST_WAIT:
                    over.append(f"{f.relative_to(paths.REPO)}:{line}: timeout {seconds:g} s")
    assert over == [], over


def test_the_cold_deploy_may_take_longer_but_ends_well_inside_ci():
    assert budget.LONGEST_WAIT < budget.COLD_DEPLOY <= 45 * 60
    conftest = (paths.REPO / "tests/spack/conftest.py").read_text()
    assert "timeout=COLD_DEPLOY" in conftest

