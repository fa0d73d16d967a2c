"""Sites: the facts of each (sites/<site>.yaml), its Ansible inventory, and which site a
ReFrame system runs."""
