"""Job-side tools: run inside jobs as `python3 -m iostack_rfm.jobs.<module>` by whatever
python3 the job has, so standard library only (they may import each other); pyproject.toml's
contract "job tools run under any python3: standard library only" holds them to it."""
