"""Sites: one name, found under that name in every tree of the repository."""
from iostack import paths
from iostack.run import die


def spack_sites():
    return sorted(p.name for p in paths.SPACK_ENV_SITES.iterdir() if (p / "spack.yaml").is_file())


def ansible_sites():
    if not paths.ANSIBLE_INVENTORIES.is_dir():
        return []
    return sorted(p.name for p in paths.ANSIBLE_INVENTORIES.iterdir()
                  if p.is_dir() and p.name != "common")


def reframe_systems():
    """System names in the ReFrame configuration, read without importing ReFrame."""
    import ast

    tree = ast.parse(paths.REFRAME_CONFIG.read_text())
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            keys = [k.value for k in node.keys if isinstance(k, ast.Constant)]
            if "name" in keys and "partitions" in keys:
                value = node.values[keys.index("name")]
                if isinstance(value, ast.Constant):
                    names.append(value.value)
    return sorted(names)


def check_site(site: str) -> str:
    known = spack_sites()
    if site not in known:
        die(f"unknown site {site!r}; known sites: {', '.join(known)}")
    return site
