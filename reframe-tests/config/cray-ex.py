# ReFrame configuration of site cray-ex: its systems cray-ex. Generated from sites/cray-ex.yaml
# by `bin/iostack site generate cray-ex`: change the facts (or the named hand-written file
# beside this one), then generate again.
from iostack_rfm.config import site_configuration as _site_configuration

site_configuration = _site_configuration('cray-ex')
