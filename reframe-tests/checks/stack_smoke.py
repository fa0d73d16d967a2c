"""Stack smoke check: every package of the site loads and answers with its version.

One test case per root spec of the site's committed spack.lock (so the list follows the
stack, never a hand-kept list): load the package's module (after its MPI's, as the Lmod
hierarchy requires), run its main executable's version query (iostack_rfm.smoke) and
compare the version it reports with the lock's.

Where the site's module tree is absent ($IOSTACK_ROOT/modulefiles/Core, made by
`bin/iostack deploy`), as on CI's `local` without Spack: packages the lock marks external
(Debian's, on PATH) are still queried from their prefix, with the module-load part skipped
and said so in the job output and the report (`module_check`); a package Spack would
build fails, since nothing else provides it.
"""
import os
import pathlib

import reframe as rfm
import reframe.core.runtime as rt
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, run_after, run_before, sanity_function, variable
from reframe.core.logging import getlogger

from iostack.deployment import stack
from iostack.site import facts as site_facts
from iostack_rfm import smoke
from iostack_rfm.base import IostackMixin, parsed

# The site of the system ReFrame runs on, read when the checks load (like
# reframe.utility.find_modules does), so the parameters are the site's own packages.
SITE = site_facts.site_of_system(rt.runtime().system.name)
ROOTS = {spec.key: spec for spec in stack.site_roots(SITE)}
NO_LOCK = 'no-spack-lock'
# Environment feature of the programming environment a compiler's builds are used in.
COMPILER_FEATURES = {'cce': 'cce', 'cray': 'cce', 'gnu': 'gnu', 'gcc': 'gnu'}


def module_tree():
    """The site's Lmod Core directory, where bin/iostack says the deployment is."""
    root = os.environ.get('IOSTACK_ROOT')
    if not root and os.environ.get('IOSTACK_RFM_STATE'):
        root = str(pathlib.Path(os.environ['IOSTACK_RFM_STATE']).parent)
    return pathlib.Path(root) / 'modulefiles' / 'Core' if root else None


@rfm.simple_test
class StackSmokeCheck(IostackMixin, rfm.RunOnlyRegressionTest):
    descr = "a stack package's module loads and its program reports the locked version"
    package = parameter(sorted(ROOTS) or [NO_LOCK])
    valid_systems = ['*']
    valid_prog_environs = ['+stack']
    num_tasks = 1
    tags = {'smoke', 'stack', 'nightly'}
    #: how the module part went: `loaded`, `external-module`, or why it was skipped
    module_check = variable(str, value='')
    #: version the site's spack.lock pins
    expected_version = variable(str, value='')
    #: set when the check cannot run the query at all; the sanity stage reports it
    setup_error = variable(str, value='')

    @run_after('init')
    def describe(self):
        spec = ROOTS.get(self.package)
        self.expected_version = spec.version if spec else ''
        self.descr = f'{self.package} of site {SITE} loads and reports its version'
        # a CCE build in the Cray environment, a GNU build in the GNU one
        feature = COMPILER_FEATURES.get(spec.compiler) if spec else None
        if feature:
            self.valid_prog_environs = [f'+stack +{feature}']

    def _fail_early(self, message):
        self.setup_error = message
        self.executable = 'echo'
        self.executable_opts = [f'"iostack-smoke: ERROR {message}"']

    @run_before('run')
    def set_job(self):
        spec = ROOTS.get(self.package)
        if spec is None:
            return self._fail_early(
                f'site {SITE} has no spack.lock ({stack.lock_path(SITE)}): '
                f'run bin/iostack lock --update {SITE}')
        query = smoke.version_query(spec)
        if query is None:
            return self._fail_early(
                f'no version query known for {spec.name}: add one to '
                'reframe-tests/iostack_rfm/smoke.py VERSION_QUERIES')
        tree = module_tree()
        self.prerun_cmds = []
        if tree is not None and tree.is_dir():
            self.modules = spec.modules_to_load()
            self.module_check = 'loaded'
        elif spec.external_modules:
            # an external the site provides as a module (e.g. the Cray PE's)
            self.modules = list(spec.external_modules)
            self.module_check = 'external-module'
        elif spec.external_prefix:
            self.module_check = (f'skipped: module tree {tree} absent (bin/iostack deploy '
                                 f'--site {SITE} makes it); external from {spec.external_prefix}')
            getlogger().warning(f'{self.display_name}: module load {spec.module} '
                                f'{self.module_check}')
            self.prerun_cmds.append(f'echo "iostack-smoke: module load {spec.module} '
                                    f'{self.module_check}"')
            if spec.external_prefix not in ('/usr', '/'):
                self.prerun_cmds.append(f'export PATH={spec.external_prefix}/bin:$PATH')
            if query.path_setup:
                self.prerun_cmds.append(query.path_setup.format(prefix=spec.external_prefix))
        else:
            return self._fail_early(
                f'module tree {tree} absent and {spec.name} is built by Spack: '
                f'run bin/iostack deploy --site {SITE}')
        if self.modules:
            # a job script goes on after a failed `module load`: list what did load
            self.prerun_cmds.append(smoke.LOADED_MODULES_LINE)
        self.executable = query.command

    @sanity_function
    def validate(self):
        if self.setup_error:
            return sn.assert_false(self.setup_error, msg=self.setup_error)
        query = smoke.version_query(ROOTS[self.package])
        reported = parsed(smoke.reported_version, self.stdout, query=query)
        checks = [sn.assert_eq(reported, self.expected_version,
                               msg=f'{self.package} reports version {{0}}, '
                                   f'spack.lock of {SITE} pins {{1}}')]
        if self.modules:
            loaded = parsed(smoke.loaded_modules, self.stdout)
            for module in self.modules:
                checks.append(sn.assert_in(module, loaded, msg=f'module {module} did not load'))
        return sn.all(checks)
