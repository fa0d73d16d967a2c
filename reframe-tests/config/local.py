# ReFrame configuration of site local: its systems local, local-slurm, local-cluster. Generated
# from sites/local.yaml by `bin/iostack site generate local`: change the facts (or the named
# hand-written file beside this one), then generate again.
from iostack_rfm.config import site_configuration as _site_configuration

site_configuration = _site_configuration('local')
