"""The library logs (a logger per module) and the CLI decides what is printed
(iostack.cli.configure_output, render): no module of lib/iostack prints, except the CLI and
the `main` of a module that is its own program (`python3 -m iostack...`, and the trust check
bin/iostack runs before the CLI)."""
import ast
import logging

from iostack import cli
from iostack.core import paths

LIB = paths.REPO / "lib" / "iostack"


def _prints(tree: ast.AST):
    """(line, enclosing function) of each print() call."""
    found = []

    def visit(node, function):
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            if (isinstance(child, ast.Call) and isinstance(child.func, ast.Name)
                    and child.func.id == "print"):
                found.append((child.lineno, function))
            visit(child, inner)
    visit(tree, None)
    return found


def test_no_library_module_prints():
    offenders = []
    for path in sorted(LIB.rglob("*.py")):
        if path.name == "cli.py":
            continue
        source = path.read_text()
        own_program = '__name__ == "__main__"' in source or path.name == "trust.py"
        for line, function in _prints(ast.parse(source)):
            if not (own_program and function == "main"):
                offenders.append(f"{path.relative_to(paths.REPO)}:{line} ({function})")
    assert offenders == []


def test_the_scan_finds_a_print():
    assert _prints(ast.parse("def f():\n    print('x')\n")) == [(2, "f")]


def test_the_cli_prints_information_on_stdout_and_warnings_on_stderr(capsys):
    cli.configure_output()
    log = logging.getLogger("iostack.some.module")
    log.info("built")
    log.info("+ spack install", extra={"bare": True})
    log.warning("warning: lease ran out")
    out, err = capsys.readouterr()
    assert out == "iostack: built\n+ spack install\n"
    assert err == "iostack: warning: lease ran out\n"
