from iostack.deployment import fdbconfig


def test_schema_search_order(tmp_path):
    explicit = tmp_path / "explicit"
    explicit.write_text("x")
    spack_prefix = tmp_path / "prefix"
    (spack_prefix / "etc/fdb").mkdir(parents=True)
    (spack_prefix / "etc/fdb/schema").write_text("x")
    assert fdbconfig.find_schema({"FDB5_SCHEMA": str(explicit), "FDB_ROOT": str(spack_prefix)}) == explicit
    assert fdbconfig.find_schema({"FDB_ROOT": str(spack_prefix)}) == spack_prefix / "etc/fdb/schema"


def test_render_fills_root_and_schema(tmp_path):
    text = fdbconfig.render(tmp_path / "root", tmp_path / "schema")
    assert f"path: {tmp_path / 'root'}" in text
    assert f"schema: {tmp_path / 'schema'}" in text
    assert "${" not in text


def test_cli_creates_the_root_and_writes_the_config(tmp_path):
    schema = tmp_path / "schema"
    schema.write_text("x")
    out = tmp_path / "fdb.yaml"
    assert fdbconfig.main(["--root", str(tmp_path / "r"), "--out", str(out), "--schema", str(schema)]) == 0
    assert (tmp_path / "r").is_dir() and "engine: toc" in out.read_text()


def test_deploy_writes_the_deployments_config_in_process(tmp_path, capsys):
    from iostack.deployment import deploy

    schema = tmp_path / "schema"
    schema.write_text("x")
    deploy.render_fdb_config(tmp_path / "root", schema=schema)
    config = tmp_path / "root" / "etc" / "fdb5" / "config.yaml"
    assert f"path: {tmp_path / 'root' / 'var' / 'fdb'}" in config.read_text()
    assert f"schema: {schema}" in config.read_text()
    assert (tmp_path / "root" / "var" / "fdb").is_dir()
    assert f"FDB config: {config}" in capsys.readouterr().out
