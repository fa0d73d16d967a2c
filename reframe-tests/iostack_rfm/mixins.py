"""ReFrame mixins the checks share: recorded references, the partition's launch options and
I/O directory (read from the partition's `extras` in config/iostack.py)."""
import inspect
import os

import reframe as rfm
from reframe.core.builtins import run_after, run_before, variable
from reframe.core.logging import getlogger

from iostack_rfm import references, stack


class RecordedReferences(rfm.RegressionTestPlugin):
    """Sets `reference` from references/<check module>.yaml (see iostack_rfm.references).

    A partition without a baseline gets a reference no value meets, so the check fails
    there, and a warning says how to record one."""

    #: the test's parameters as the references file keys them (stored in the report, so
    #: record-baseline files each value under the variant that produced it)
    reference_variant = variable(str, value=references.ANY_VARIANT)

    def _references_section(self):
        path = references.references_file(inspect.getfile(type(self)))
        return path, references.load(path).get(type(self).__name__, {})

    @run_after('init')
    def load_recorded_references(self):
        params = {name: getattr(self, name) for name in type(self).param_space.params}
        self.reference_variant = references.variant_key(params)
        _, section = self._references_section()
        self.reference = references.reference_dict(section, self.reference_variant)

    @run_before('performance')
    def explain_missing_baseline(self):
        path, section = self._references_section()
        partition = self.current_partition.fullname
        if not references.has_baseline(section, partition, self.reference_variant):
            site = stack.site_of_system(self.current_system.name)
            getlogger().warning(
                f'{self.display_name}: no baseline for {partition} in {path.name}, so its '
                f'reference cannot be met and the check fails until one is recorded: run the '
                f'nightly, then `bin/iostack record-baseline --site {site} --system '
                f'{self.current_system.name} --check {type(self).__name__}` and commit '
                f'reframe-tests/references/{path.name}')


class PartitionLaunch(rfm.RegressionTestPlugin):
    """Adds the partition's `extras['launcher_options']` (e.g. seed 003's binding) to every
    parallel launch of the job."""

    @run_before('run')
    def add_partition_launcher_options(self):
        options = self.current_partition.extras.get('launcher_options', [])
        self.job.launcher.options += [o for o in options if o not in self.job.launcher.options]


def io_dir(test) -> str:
    """Where an I/O check writes: the partition's `extras['io_dir']` (a file system the
    site cares about, e.g. Lustre or NVMe), in a directory of the test's own, else its
    stage directory."""
    base = test.current_partition.extras.get('io_dir')
    if not base:
        return test.stagedir
    return os.path.join(base, f'{test.current_system.name}-{test.short_name}')
