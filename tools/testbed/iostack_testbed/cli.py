"""iostack-testbed: start, stop and use the test beds.

    iostack-testbed run slurm -- bin/iostack nightly --site local --system local-slurm
    iostack-testbed run cluster -- bin/iostack nightly --site local --system local-cluster
    iostack-testbed cluster up|down|status|env [--state-dir DIR] [--blank-scratch]
    iostack-testbed slurm start|stop|config --state-dir DIR
    iostack-testbed lmod-bench [--root DEPLOYMENT] [--generated N] [--runs N]

`run` starts the test bed, runs the command with what a Slurm client needs to reach it
(SLURM_CONF; for the cluster also IOSTACK_CLUSTER_SSH_CONFIG), stops the test bed however
the command ended, and exits with the command's status.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import sys

from iostack.core.settings import Settings
from iostack_testbed import campaign, cluster, lmodbench, slurm
from iostack_testbed.errors import TestbedError


def default_state_dir(bed: str) -> pathlib.Path:
    """Under the `local` site's deployment root, as the nightly's run used."""
    return Settings.from_environ(os.environ).deploy_root("local") / bed


def run_with(args) -> int:
    command = args.command
    state = args.state_dir or default_state_dir(args.bed)
    bed = (cluster.LocalCluster(state, timeout=args.timeout) if args.bed == "cluster"
           else slurm.LocalSlurm(state, timeout=args.timeout))
    print(f"iostack-testbed: starting the {args.bed} test bed in {bed.state}", flush=True)
    bed.start()
    try:
        print(f"iostack-testbed: {' '.join(f'{k}={v}' for k, v in bed.env().items())} "
              f"{' '.join(command)}", flush=True)
        return subprocess.run(command, env={**os.environ, **bed.env()}).returncode
    finally:
        bed.stop()
        print(f"iostack-testbed: the {args.bed} test bed is stopped", flush=True)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="iostack-testbed", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="subcommand", required=True)

    p = sub.add_parser("run", help="start a test bed, run a command against it, stop it")
    p.add_argument("bed", choices=["slurm", "cluster"])
    p.add_argument("--state-dir", type=pathlib.Path,
                   help="where the test bed keeps everything (default: <deploy root of local>/<bed>)")
    p.add_argument("--timeout", type=float, default=120.0,
                   help="seconds to wait for the daemons (default 120)")
    p.add_argument("command", nargs="+", help="the command, after --")
    p.set_defaults(func=run_with)

    p = sub.add_parser("cluster", help="the multi-node cluster (ReFrame system local-cluster)")
    cluster.add_arguments(p)
    p.set_defaults(func=cluster.run)

    p = sub.add_parser("slurm", help="the single-node Slurm (ReFrame system local-slurm)")
    p.add_argument("action", choices=["start", "stop", "config"])
    p.add_argument("--state-dir", required=True, type=pathlib.Path)
    p.add_argument("--timeout", type=float, default=90.0)
    p.set_defaults(func=lambda a: slurm.run(a.action, a.state_dir, a.timeout))

    p = sub.add_parser("campaign", add_help=False,
                       help="the nightly's sensitivity, measured with real slowdowns "
                            "(run, analyse, sessions; `campaign --help`)")
    p.add_argument("campaign_args", nargs=argparse.REMAINDER)
    p.set_defaults(func=lambda a: campaign.main(a.campaign_args))

    p = sub.add_parser("lmod-bench", help="time module avail/spider with and without the "
                                          "spider cache")
    lmodbench.add_arguments(p)
    p.set_defaults(func=lmodbench.run)
    return ap


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130
    except TestbedError as e:
        print(f"iostack-testbed: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
