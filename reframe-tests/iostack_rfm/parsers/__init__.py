"""Parsers and judges of what the checks' jobs print and leave (text in, figures or problems
out), and the shell lines the plugins add: no ReFrame, no plugins, no job tools, no programs
started (pyproject.toml's contract "parsers are pure")."""
