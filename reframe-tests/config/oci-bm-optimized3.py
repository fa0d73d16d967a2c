# ReFrame configuration of site oci-bm-optimized3: its systems oci-bm-optimized3. Generated from
# sites/oci-bm-optimized3.yaml by `bin/iostack site generate oci-bm-optimized3`: change the
# facts (or the named hand-written file beside this one), then generate again.
from iostack_rfm.config import site_configuration as _site_configuration

site_configuration = _site_configuration('oci-bm-optimized3')
