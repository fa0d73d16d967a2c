"""Stack smoke check: every package of the site's release is installed as locked, its module
loads, its program answers, and the tests its recipe ships pass.

One test case per root spec of the release's spack.lock (so the list follows the stack,
never a hand-kept list). Each job:
- loads the package's module after its compiler's and MPI's, as the Lmod hierarchy needs;
  a module tree that is missing or a module that does not load fails the case;
- asks Spack for the installed spec of the lock's hash (`spack find /<hash>`): its version
  must be the lock's, and the program on PATH must be the one in that prefix;
- runs the program's own version query where it has one (iostack_rfm.parsers.smoke) and compares;
- runs the recipe's stand-alone tests (`spack test run /<hash>`): they must pass, or Spack
  must say there are none (an external is not tested: its package is the system's).
Spack runs as `bin/iostack spack --site <site> --root <deployment>`, the deployment's own
install tree and configuration.
"""
import os

import reframe as rfm
import reframe.core.runtime as rt
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, run_after, run_before, sanity_function, variable

from iostack.core import paths
from iostack.deployment import stack
from iostack.site.target import SpackEnv
from iostack_rfm import context
from iostack_rfm.parsers import smoke
from iostack_rfm.base import OPENMPI_AS_ROOT, IostackMixin, parsed

# The site of the system ReFrame runs on, read when the checks load (like
# reframe.utility.find_modules does), so the parameters are the site's own packages.
SITE = context.site_of_system(rt.runtime().system)
ROOTS = {spec.key: spec for spec in stack.roots_of(SpackEnv(SITE), context.release_lock())}
NO_LOCK = 'no-spack-lock'
# Environment feature of the programming environment a compiler's builds are used in.
COMPILER_FEATURES = {'cce': 'cce', 'cray': 'cce', 'gnu': 'gnu', 'gcc': 'gnu'}


def module_tree():
    """The Lmod Core directory of the release under test (bin/iostack names it)."""
    tree = context.release()
    return tree / 'modulefiles' / 'Core' if tree else None


@rfm.simple_test
class StackSmokeCheck(IostackMixin, rfm.RunOnlyRegressionTest):
    descr = "a stack package is installed as locked, loads, answers, and passes its tests"
    package = parameter(sorted(ROOTS) or [NO_LOCK])
    valid_systems = ['*']
    valid_prog_environs = ['+stack']
    num_tasks = 1
    tags = {'smoke', 'stack', 'deploy', 'nightly'}
    #: version the site's spack.lock pins
    expected_version = variable(str, value='')
    #: set when the check cannot run at all; the sanity stage reports it
    setup_error = variable(str, value='')
    #: what `spack test run` said: passed, no-tests, skipped (an external), failed
    spack_test = variable(str, value='')

    @run_after('init')
    def describe(self):
        spec = ROOTS.get(self.package)
        self.expected_version = spec.version if spec else ''
        self.descr = f'{self.package} of site {SITE}: installed, loads, answers, tested'
        # a CCE build in the Cray environment, a GNU build in the GNU one
        feature = COMPILER_FEATURES.get(spec.compiler) if spec else None
        if feature:
            self.valid_prog_environs = [f'+stack +{feature}']

    def _fail_early(self, message):
        self.setup_error = message
        self.executable = 'echo'
        self.executable_opts = [f'"iostack-smoke: ERROR {message}"']

    def spack(self, *args):
        """A Spack command on the deployment under test, in the environment its release was
        built in (`spack find /<hash>` in another finds nothing of that one's), as its job
        runs it."""
        env = SpackEnv.parse(context.release_env() or SITE).env
        return (f'{paths.REPO}/bin/iostack spack --site {SITE} --root {context.root()} '
                + (f'--env {env} ' if env else '') + '-- ' + ' '.join(args))

    @run_before('run')
    def set_job(self):
        spec = ROOTS.get(self.package)
        if spec is None:
            return self._fail_early(
                f'site {SITE} has no spack.lock '
                f'({context.release_lock() or SpackEnv(SITE).committed_lock}): '
                f'run bin/iostack lock --update {SITE}')
        tree = module_tree()
        if tree is None or not tree.is_dir():
            return self._fail_early(
                f'module tree {tree} absent: deploy the site (bin/iostack deploy --site '
                f'{SITE}) and run the check on it')
        self.modules = spec.modules_to_load()
        # a job script goes on after a failed `module load`: list what did load
        self.prerun_cmds = [smoke.LOADED_MODULES_LINE]
        query = smoke.version_query(spec)
        self.executable = query.command if query else 'true'
        self.env_vars.update(OPENMPI_AS_ROOT)     # MPI programs' tests run as root in CI
        alias = f'smoke-{spec.name}-{spec.hash[:7]}'
        self.postrun_cmds = [
            self.spack('find', '--format', f"'{smoke.INSTALLED_FORMAT}'", f'/{spec.hash}'),
            'echo "iostack-smoke: spack find rc=$?"',
            # the program on PATH (none for a library or a bundle)
            f'echo "iostack-smoke: on PATH {smoke.program(spec) or "-"} '
            f'$(command -v {smoke.program(spec) or "true"})"',
            # the suite staged in a directory of this job's: Spack keeps every suite it ran,
            # and refuses an alias it has (a retry, the next night) as "already exists"; and a
            # release mounted from an image is read-only. A short one, under /tmp: Darshan
            # 3.4.7 aborts at MPI_Finalize ("buffer overflow detected") when its log's path
            # reaches about 256 characters (measured: 240 writes its log, 256 aborts), and
            # darshan-runtime's own test writes its log in the suite's stage; the job's stage
            # keeps a link to it
            'st=$(mktemp -d /tmp/iostack-spack-test.XXXXXX) && ln -s "$st" spack-test-stage',
            self.spack('-c', '"config:test_stage:$st"', 'test', 'run',
                       '--alias', alias, f'/{spec.hash}') + ' > spack-test.out 2>&1',
            'rc=$?; echo "iostack-smoke: spack test rc=$rc"; [ $rc != 0 ] || rm -rf "$st"',
        ]

    @sanity_function
    def validate(self):
        if self.setup_error:
            return sn.assert_false(self.setup_error, msg=self.setup_error)
        spec = ROOTS[self.package]
        installed = parsed(smoke.installed, self.stdout)
        checks = [
            sn.assert_found(r'^iostack-smoke: spack find rc=0$', self.stdout,
                            msg=f'Spack has no installed spec /{spec.hash} ({self.package})'),
            sn.assert_eq(sn.getitem(installed, 'version'), self.expected_version,
                         msg=f'{self.package}: Spack installed version {{0}}, '
                             f'spack.lock of {SITE} pins {{1}}'),
            sn.assert_eq(parsed(smoke.program_problems, self.stdout, spec=spec), [],
                         msg='{0}'),
            sn.assert_eq(parsed(smoke.spack_test_problems, 'spack-test.out', self.stdout), [],
                         msg=f'{self.package}: spack test run: {{0}}'),
        ]
        query = smoke.version_query(spec)
        if query is not None:
            reported = parsed(smoke.reported_version, self.stdout, query=query)
            checks.append(sn.assert_eq(reported, self.expected_version,
                                       msg=f'{self.package} reports version {{0}}, '
                                           f'spack.lock of {SITE} pins {{1}}'))
        loaded = parsed(smoke.loaded_modules, self.stdout)
        for module in self.modules:
            checks.append(sn.assert_in(module, loaded, msg=f'module {module} did not load'))
        return sn.all(checks)

    @run_before('sanity')
    def name_what_spack_tested(self):
        """What `spack test run` said (iostack_rfm.parsers.smoke.spack_test_status), kept in the
        report beside the case."""
        path = os.path.join(self.stagedir, 'spack-test.out')
        if not self.setup_error and os.path.isfile(path):
            with open(path, errors='replace') as f:
                self.spack_test = smoke.spack_test_status(f.read())
