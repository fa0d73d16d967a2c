# ReFrame configuration of site setonix: its systems setonix. Generated from sites/setonix.yaml
# by `bin/iostack site generate setonix`: change the facts (or the named hand-written file
# beside this one), then generate again.
from iostack_rfm.config import site_configuration as _site_configuration

site_configuration = _site_configuration('setonix')
