"""The ReFrame regression: running it (reframe, nightly), its stored results, the checks'
references and baselines, the published sample data, and the report."""
