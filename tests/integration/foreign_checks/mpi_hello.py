# A check as a site writes its own, with nothing of iostack: any MPI partition, any MPI
# environment, two ranks, each of which must say hello.
import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import sanity_function


@rfm.simple_test
class MpiHelloWorld(rfm.RegressionTest):
    valid_systems = ['+mpi']
    valid_prog_environs = ['+mpi']
    build_system = 'SingleSource'
    sourcepath = 'mpi_hello.c'
    num_tasks = 2
    num_tasks_per_node = 2

    @sanity_function
    def every_rank_says_hello(self):
        said = sn.extractall(r'hello from rank (\d+) of (\d+)', self.stdout, tag=(1, 2),
                             conv=int)
        return sn.assert_eq(sn.sorted(said), [(r, self.num_tasks) for r in range(self.num_tasks)])
