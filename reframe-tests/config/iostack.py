# ReFrame configuration for iostack: one system per site (same names as spack-env/sites/
# and ansible/inventories/), plus `local-slurm`, the local site behind a single-node Slurm.
#
# Checks choose partitions and environments by feature (`valid_systems = ['+fdb']`), never
# by name, so a new site runs the suite once its partitions declare their features.
import os
import pathlib
import sys

# The checks import iostack_rfm from beside this directory.
_RFM_ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(_RFM_ROOT) not in sys.path:
    sys.path.insert(0, str(_RFM_ROOT))

_STATE = os.environ.get('IOSTACK_RFM_STATE', str(_RFM_ROOT))

site_configuration = {
    'systems': [
        {
            'name': 'local',
            'descr': 'plain Debian 12 node, local scheduler (the embedded default)',
            'hostnames': ['.*'],
            'modules_system': 'lmod',
            'partitions': [
                {
                    'name': 'default',
                    'descr': 'this node',
                    'scheduler': 'local',
                    'launcher': 'local',
                    'environs': ['stack'],
                    'max_jobs': 2,
                    'features': ['fdb', 'grib', 'local-fs'],
                },
            ],
        },
    ],
    'environments': [
        {
            # Debian's stack is on PATH; no module to load.
            'name': 'stack',
            'target_systems': ['local'],
            'cc': 'gcc', 'cxx': 'g++', 'ftn': 'gfortran',
            'features': ['fdb', 'grib', 'eccodes'],
        },
    ],
    'modes': [
        {
            'name': 'nightly',
            'options': ['--max-retries=1', '--exec-policy=async'],
        },
    ],
    'general': [
        {
            'check_search_path': [str(_RFM_ROOT / 'checks')],
            'check_search_recursive': True,
            'report_file': f'{_STATE}/reports/run-report-{{sessionid}}.json',
        },
    ],
    'logging': [
        {
            'handlers': [
                {'type': 'stream', 'name': 'stdout', 'level': 'info', 'format': '%(message)s'},
                {'type': 'file', 'name': f'{_STATE}/reframe.log', 'level': 'debug',
                 'format': '[%(asctime)s] %(levelname)s: %(check_info)s: %(message)s',
                 'append': False},
            ],
            'handlers_perflog': [
                {'type': 'filelog', 'prefix': '%(check_system)s/%(check_partition)s',
                 'level': 'info',
                 'format': ('%(check_job_completion_time)s|%(check_info)s|'
                            '%(check_perf_var)s=%(check_perf_value)s %(check_perf_unit)s|'
                            'ref=%(check_perf_ref)s'),
                 'append': True},
            ],
        },
    ],
}
