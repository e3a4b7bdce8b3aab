"""Settings: YAML, environment and overrides merge; bad input is one line naming the field."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from controlplane.cli.store_origin import db_url_named
from controlplane.settings import ConfigError, load_settings
from controlplane.store import Store, StoreUnavailable


def test_yaml_values_are_overridden_by_the_environment(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "headroom.yaml"
    config.write_text("reconcile:\n  interval_s: 45\nforecast:\n  horizon_s: 1800\n")
    monkeypatch.setenv("HEADROOM_RECONCILE__INTERVAL_S", "15")
    settings = load_settings(config)
    assert settings.reconcile.interval_s == 15
    assert settings.forecast.horizon_s == 1800


@pytest.mark.parametrize(("yaml_text", "expected"), [
    ("reconcile:\n  interval_s: -5\n", "reconcile.interval_s: Input should be greater than 0"),
    ("reconcile:\n  intervals: 5\n", "reconcile.intervals: unknown key"),
    ("surprise: true\n", "surprise: unknown key"),
    ("pools:\n  - {name: a, product: L4, price_per_gpu_hour: 1, min_nodes: 3, max_nodes: 1}\n",
     "pool a: min_nodes > max_nodes"),
    ("forecast:\n  horizon_s: 30\n  step_s: 60\n", "forecast.horizon_s must be >= forecast.step_s"),
    ("reconcile: [1,\n", "line 2"),
    ("autoscaling:\n  calibration_window_s: 0\n",
     "autoscaling.calibration_window_s: Input should be greater than 0"),
    ("autoscaling:\n  calibration_window_s: 3600\n",
     "autoscaling.calibration_window_s (3600 s) holds 12 forecast refreshes (forecast.interval_s "
     "= 300 s); the upper tail is calibrated from 48 errors, so it must be >= 14400 s"),
    ("placement:\n  metrics_listen: '9464'\n",
     "placement.metrics_listen: Value error, '9464': expected HOST:PORT"),
    ("placement:\n  listen: '50051'\n",
     "placement.listen: Value error, '50051': expected HOST:PORT"),
    ("pools:\n  - {name: GPU_Pool, product: L4, price_per_gpu_hour: 1}\n",
     "pools.0.name: String should match pattern"),
    ("pools:\n  - {name: " + "a" * 50 + ", product: L4, price_per_gpu_hour: 1}\n",
     "pools.0.name: String should have at most 49 characters"),
    ("42\n", "the top level must be a mapping of settings (db:, reconcile:, ...), got 42"),
    ("- reconcile: {interval_s: 5}\n", "the top level must be a mapping of settings"),
    ("db:\n  connect_timeout_s: .inf\n", "db.connect_timeout_s: Input should be a finite number"),
    ("sim:\n  step_s: .nan\n", "sim.step_s: Input should be a finite number"),
    ("pools: []\n", "pools: List should have at least 1 item after validation, not 0"),
    ("pools:\n  - {name: a, product: L4, gpus_per_node: 100000, price_per_gpu_hour: 1}\n",
     "pools.0.gpus_per_node: Input should be less than or equal to 64"),
    ("pools:\n  - {name: a, product: L4, price_per_gpu_hour: 1e300}\n",
     "pools.0.price_per_gpu_hour: Input should be less than or equal to 1000000"),
    ("autoscaling:\n  tenant_gpu_budgets: {acme: -1}\n",
     "autoscaling.tenant_gpu_budgets.acme: Input should be greater than or equal to 0"),
    ("autoscaling:\n  policy: static\n  static_peak_rps: {llama-3-8b-chat: -5}\n",
     "autoscaling.static_peak_rps.llama-3-8b-chat: Input should be greater than or equal to 0"),
    ("reconcile:\n  interval_s: true\n",
     "reconcile.interval_s: Value error, expected a number, got true"),
    ("sim:\n  node_provision_s: [false, 60]\n",
     "sim.node_provision_s: Value error, expected a number, got [false, 60]"),
    ("pools:\n  - {name: a, product: A100-80GB, price_per_gpu_hour: 1}\n"
     "  - {name: b, product: NVIDIA-A100-SXM4-80GB, price_per_gpu_hour: 1}\n",
     "pools: one pool per GPU product (the fleet plan places by product, so each pool would be "
     "sized for all of it); A100-80GB has more than one"),
    ("prometheus:\n  query: sum(rate(x[5m]))\n",
     "prometheus.query: Value error, PromQL 'sum(rate(x[5m]))' has no {model} placeholder"),
    ("prometheus:\n  password: s3cret\n",
     "prometheus.username and prometheus.password go together"),
    ("prometheus:\n  metric: dcgm\n",
     "prometheus.metric: Input should be 'triton', 'vllm' or 'sglang'"),
    # REFERENCE.md §1.6: Headroom's layouts mix profiles on a GPU, which needs the mixed
    # strategy; under single GFD counts MIG devices in nvidia.com/gpu.count
    ("k8s:\n  mig_strategy: single\n", "k8s.mig_strategy: Input should be 'mixed'"),
    ("prometheus:\n  rate_window_s: 0\n",
     "prometheus.rate_window_s: Input should be greater than or equal to 1"),
    ("prometheus:\n  latency_quantile: 0.95\n",
     "prometheus.latency_quantile needs a request latency histogram; metric triton has none"),
    ("prometheus:\n  metric: vllm\n  latency_quantile: 95\n",
     "prometheus.latency_quantile: Input should be less than 1"),
    ("prometheus:\n  metric: vllm\n  latency_quantile: 0.95\n"
     "  latency_query: my_p95_ms{model=\"{model}\"}\n",
     "a prometheus.latency_query decides its own statistic: give one of them"),
    ("reconcile:\n  queue_drain_s: -5\n",
     "reconcile.queue_drain_s: Input should be greater than or equal to 0"),
    ("prometheus:\n  model_queries:\n    mistral-7b:\n      query: '  '\n",
     "prometheus.model_queries.mistral-7b.query: Value error, must not be empty"),
    ("prometheus:\n  model_queries:\n    mistral-7b:\n      query: x\n      sample: y\n",
     "prometheus.model_queries.mistral-7b.sample: unknown key"),
    ("prometheus:\n  latency: ttft\n",
     "prometheus.latency: ttft needs a time-to-first-token histogram; metric triton has none"),
    ("prometheus:\n  metric: sglang\n  latency: ttft\n"
     "  latency_query: my_ttft_ms{model=\"{model}\"}\n",
     "a prometheus.latency_query decides what it times: give one of them"),
    ("prometheus:\n  metric: vllm\n  latency: tpot\n",
     "prometheus.latency: Input should be 'e2e' or 'ttft'"),
    ("prometheus:\n  by_engine: true\n  query: my_rps{model=\"{model}\"}\n",
     "prometheus.by_engine reads each model by its engine's preset; a prometheus.query "
     "replaces the presets"),
], ids=["negative interval", "misspelt key", "unknown top-level key", "pool bounds",
        "cross-field horizon", "broken yaml", "calibration window zero",
        "calibration window too short to calibrate", "metrics address without a host",
        "placement address without a host",
        "pool name not a DNS label", "pool name too long for its placeholder",
        "a number instead of a mapping", "a list instead of a mapping",
        "infinite timeout", "nan step", "no pools",
        "more GPUs per node than the placement engine takes",
        "a price the placement engine takes for a unit mistake", "negative tenant budget",
        "negative static peak", "a boolean for seconds", "a boolean in a range",
        "two pools of one product under two names", "custom PromQL without {model}",
        "a password without a username", "an unknown metric preset",
        "a MIG strategy that cannot hold mixed layouts", "a zero rate window",
        "a latency quantile of triton", "a latency quantile in per cent",
        "a latency quantile and a latency query", "a negative queue drain time",
        "a model's blank query", "a misspelt key of a model's query",
        "a time to first token of triton", "a time to first token and a latency query",
        "an unknown latency", "engines' presets and a shared query"])
def test_bad_configuration_is_one_line_naming_the_field(tmp_path: Path, yaml_text: str,
                                                        expected: str) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(yaml_text)
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    message = str(caught.value)
    assert expected in message and str(config) in message
    assert "\n" not in message


def test_every_mistake_of_a_settings_file_is_its_own_line_naming_the_key(
        tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("reconcile:\n  intervl_s: 30\n  target_utilization: 7\n"
                      "forecast:\n  step_s: -60\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    lines = str(caught.value).splitlines()
    assert len(lines) == 3, lines
    assert all(line.startswith(f"{config}: ") for line in lines)
    assert any("reconcile.intervl_s: unknown key; did you mean reconcile.interval_s?" in line
               for line in lines)
    assert any("reconcile.target_utilization: " in line for line in lines)
    assert any("forecast.step_s: " in line and "got -60" in line for line in lines)


@pytest.mark.parametrize(("yaml_text", "expected"), [
    ("forecast:\n  horizon_s: 30\n  step_s: 60\n",
     "forecast.horizon_s must be >= forecast.step_s"),
    ("placement:\n  tls_cert_file: /etc/headroom/tls.crt\n",
     "placement.tls_cert_file and placement.tls_key_file go together"),
    ("prometheus:\n  password: s3cret\n",
     "prometheus.username and prometheus.password go together"),
    ("sim:\n  node_provision_s: [60, 30]\n",
     "sim.node_provision_s must be 0 <= min <= max, got (60.0, 30.0)"),
    ("pools:\n  - {name: a, product: L4, price_per_gpu_hour: 1, min_nodes: 3, max_nodes: 1}\n",
     "pool a: min_nodes > max_nodes"),
], ids=["two groups", "one group", "one group, a secret", "a range of one group", "one pool"])
def test_a_cross_field_error_is_its_own_message_after_the_file_which_names_the_fields(
        tmp_path: Path, yaml_text: str, expected: str) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(yaml_text)
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    assert str(caught.value) == f"{config}: {expected}"


def test_a_cross_field_error_of_a_group_given_as_json_names_the_variable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEADROOM_PROMETHEUS", '{"password": "s3cret"}')
    with pytest.raises(ConfigError) as caught:
        load_settings(None)
    assert str(caught.value) == ("environment variable HEADROOM_PROMETHEUS: prometheus.username "
                                 "and prometheus.password go together")


def test_a_prometheus_password_never_shows_in_a_settings_error(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("prometheus:\n  password: s3cret\n  timeout_s: -1\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    assert "prometheus.timeout_s" in str(caught.value) and "s3cret" not in str(caught.value)
    settings = load_settings(None,
                             prometheus={"username": "ops", "password": "s3cret"})
    assert "s3cret" not in repr(settings) and "s3cret" not in str(settings.prometheus)


def test_a_missing_config_file_is_named() -> None:
    with pytest.raises(ConfigError, match=r"nope\.yaml: no such config file"):
        load_settings(Path("/nonexistent/nope.yaml"))


def test_a_config_path_that_is_a_pipe_is_named_as_one_not_as_missing(tmp_path: Path) -> None:
    pipe = tmp_path / "settings.fifo"
    os.mkfifo(pipe)
    with pytest.raises(ConfigError) as caught:
        load_settings(pipe)
    assert str(caught.value) == (f"{pipe}: not a regular file (a pipe or a device): write the "
                                 "settings to a file and give its path")


def test_a_config_path_that_is_a_directory_is_named_as_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path)
    assert str(caught.value) == f"{tmp_path}: a directory, not a config file"


@pytest.mark.parametrize(("name", "value", "expected"), [
    ("HEADROOM_SAFETY_DRY_RUN", "true", "environment variable HEADROOM_SAFETY_DRY_RUN: unknown "
     "key; did you mean HEADROOM_SAFETY__DRY_RUN (groups and fields are joined by __)?"),
    ("HEADROOM_RECONCIL__INTERVAL_S", "15", "environment variable HEADROOM_RECONCIL__INTERVAL_S: "
     "unknown group 'reconcil'; did you mean HEADROOM_RECONCILE__...?"),
    ("HEADROOM_BACKND", "kubernetes",
     "environment variable HEADROOM_BACKND: unknown key; did you mean HEADROOM_BACKEND?"),
    ("HEADROOM_DASHBOARD_PORT", "8502", "environment variable HEADROOM_DASHBOARD_PORT: unknown "
     "key; did you mean HEADROOM_DASHBOARD__PORT (groups and fields are joined by __)?"),
], ids=["one underscore short", "misspelt group", "misspelt top-level field", "port typo"])
def test_a_misspelt_environment_variable_is_refused_naming_it_instead_of_ignored(
        monkeypatch: pytest.MonkeyPatch, name: str, value: str, expected: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert str(caught.value) == expected


@pytest.mark.parametrize(("name", "value", "expected"), [
    ("HEADROOM_RECONCILE__INTERVAL_S", "-1", "environment variable "
     "HEADROOM_RECONCILE__INTERVAL_S: reconcile.interval_s: Input should be greater than 0, "
     "got -1"),
    ("HEADROOM_RECONCILE__INTERVALS", "3", "environment variable HEADROOM_RECONCILE__INTERVALS: "
     "reconcile.intervals: unknown key; did you mean HEADROOM_RECONCILE__INTERVAL_S?"),
    ("HEADROOM_RECONCILE", '{"interval_s": 0}', "environment variable HEADROOM_RECONCILE: "
     "reconcile.interval_s: Input should be greater than 0, got 0"),
], ids=["bad value", "unknown field of a known group", "the group as JSON"])
def test_a_bad_environment_variable_is_named_not_the_config_file_that_lacks_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, value: str,
        expected: str) -> None:
    config = tmp_path / "headroom.yaml"
    config.write_text("reconcile:\n  max_staleness_s: 60\n")
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    assert str(caught.value) == expected


def test_a_bad_value_in_the_config_file_is_still_blamed_on_the_file(tmp_path: Path) -> None:
    config = tmp_path / "headroom.yaml"
    config.write_text("reconcile:\n  interval_s: -1\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    assert str(caught.value) == (f"{config}: reconcile.interval_s: Input should be greater "
                                 "than 0, got -1")


def test_kubernetes_service_link_variables_of_headrooms_own_services_are_left_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {"HEADROOM_DASHBOARD_PORT": "tcp://10.96.0.7:8501",
                        "HEADROOM_DASHBOARD_SERVICE_HOST": "10.96.0.7",
                        "HEADROOM_GRPC_PORT_50051_TCP_ADDR": "10.96.0.8",
                        # a Service named like a settings group: near-misses of it by name
                        "HEADROOM_PROMETHEUS_PORT": "tcp://10.96.0.9:9090",
                        "HEADROOM_PROMETHEUS_SERVICE_PORT": "9090",
                        "HEADROOM_AUTOSCALING_PORT_80_TCP_PROTO": "tcp",
                        "HEADROOM_AUTOSCALING__TENANT_GPU_BUDGETS__ACME": "4"}.items():
        monkeypatch.setenv(name, value)
    assert load_settings().autoscaling.tenant_gpu_budgets == {"acme": 4.0}


@pytest.mark.parametrize(("name", "value", "detail"), [
    ("HEADROOM_POOLS", "notjson", "Expecting value: line 1 column 1 (char 0)"),
    ("HEADROOM_K8S__WORKLOAD_NAMESPACES", "models,batch", "Expecting value"),
    ("HEADROOM_SIM__NODE_PROVISION_S", "[60, 180", "Expecting ',' delimiter"),
], ids=["top-level list", "list in a group beside a valid variable", "truncated list"])
def test_an_environment_variable_that_is_not_json_is_named_with_the_parse_error(
        monkeypatch: pytest.MonkeyPatch, name: str, value: str, detail: str) -> None:
    monkeypatch.setenv(name, value)
    monkeypatch.setenv("HEADROOM_K8S__NAMESPACE", "headroom")  # same group, valid: not named
    monkeypatch.setenv("HEADROOM_SIM__SEED", "3")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    message = str(caught.value)
    assert message.startswith(f"environment variable {name}: not valid JSON ({detail}")
    assert "\n" not in message


def test_a_pool_of_a_gpu_product_the_catalog_does_not_know_is_refused_naming_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEADROOM_POOLS",
                       '[{"name": "x", "product": "NOPE", "price_per_gpu_hour": 1}]')
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert "pools.0.product" in str(caught.value)
    assert "unknown GPU product 'NOPE'" in str(caught.value)
    assert "A100-80GB" in str(caught.value)


def test_two_pools_of_one_name_are_refused_naming_the_name(tmp_path: Path) -> None:
    config = tmp_path / "twice.yaml"
    config.write_text("pools:\n  - {name: a100, product: A100-80GB, price_per_gpu_hour: 1.6}\n"
                      "  - {name: l4, product: L4, price_per_gpu_hour: 0.8}\n"
                      "  - {name: a100, product: H100-80GB, price_per_gpu_hour: 4.1}\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    assert "pools: names must be unique; 'a100' is the name of more than one" in str(caught.value)


@pytest.mark.parametrize("product", ["NVIDIA-A100-SXM4-80GB", "a100-80gb", "NVIDIA-A100-80GB-PCIe",
                                     "NVIDIA-A100-SXM4-80GB-SHARED"])
def test_a_pool_may_name_its_product_by_an_alias_or_gfd_label_and_holds_the_catalog_name(
        product: str) -> None:
    # the models file's profile points hold it too, so a pool and a point of one product match
    settings = load_settings(pools=[{"name": "x", "product": product, "price_per_gpu_hour": 1}])
    assert settings.pools[0].product == "A100-80GB"


@pytest.mark.parametrize("yaml_text", [
    "reconcile:\n  interval_s: 10\nreconcile:\n  interval_s: 20\n",
    "reconcile:\n  interval_s: 10\n  interval_s: 20\n",
], ids=["group given twice", "field given twice in a group"])
def test_a_key_given_twice_in_the_config_file_is_refused_naming_its_line(
        tmp_path: Path, yaml_text: str) -> None:
    config = tmp_path / "twice.yaml"
    config.write_text(yaml_text)
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    assert str(caught.value).startswith(f"{config}: line 3: duplicate key ")


@pytest.mark.parametrize(("url", "expected"), [
    ("/var/lib/headroom/store.db", "db.url: Value error, '/var/lib/headroom/store.db' is not a "
     "database URL (sqlite:///FILE or postgresql+psycopg://user@host:5432/db); a SQLite file is "
     "sqlite:////var/lib/headroom/store.db"),
    ("postgresql//headroom@db:5432/headroom", "db.url: Value error, "
     "'postgresql//headroom@db:5432/headroom' is not a database URL (sqlite:///FILE or "
     "postgresql+psycopg://user@host:5432/db)"),
    ("postgresql//headroom:s3cret@db:5432/headroom", "db.url: Value error, "
     "'postgresql//headroom:***@db:5432/headroom' is not a database URL (sqlite:///FILE or "
     "postgresql+psycopg://user@host:5432/db)"),
], ids=["a bare file path", "a scheme without its colon", "a password is not echoed"])
def test_a_store_url_that_is_no_database_url_is_one_line_naming_db_url(
        monkeypatch: pytest.MonkeyPatch, url: str, expected: str) -> None:
    monkeypatch.setenv("HEADROOM_DB__URL", url)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert str(caught.value) == f"environment variable HEADROOM_DB__URL: {expected}"


SCHEMES = "sqlite, sqlite+pysqlite, postgresql, postgres, postgresql+psycopg"


@pytest.mark.parametrize(("url", "shown", "hint"), [
    ("mysql://ops:s3cret@db:3306/headroom", "mysql://ops:***@db:3306/headroom", ""),
    ("postgresql+psycopg2://ops@db:5432/headroom", "postgresql+psycopg2://ops@db:5432/headroom",
     "; did you mean postgresql+psycopg?"),
    ("sqllite:///headroom.db", "sqllite:///headroom.db", "; did you mean sqlite?"),
    ("postgres+psycopg://ops@db/headroom", "postgres+psycopg://ops@db/headroom",
     "; did you mean postgresql+psycopg?"),
], ids=["another database", "another postgresql driver", "a misspelled sqlite",
        "a driver on the short postgres scheme"])
def test_a_store_url_of_a_scheme_headroom_cannot_open_is_refused_when_settings_load(
        monkeypatch: pytest.MonkeyPatch, url: str, shown: str, hint: str) -> None:
    monkeypatch.setenv("HEADROOM_DB__URL", url)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    scheme = url.split("://", 1)[0]
    assert str(caught.value) == (
        f"environment variable HEADROOM_DB__URL: db.url: Value error, {shown!r}: Headroom "
        f"cannot open a {scheme}:// store; supported schemes: {SCHEMES}{hint}")
    assert "s3cret" not in str(caught.value)


@pytest.mark.parametrize("url", ["sqlite:///x.db", "sqlite+pysqlite:///x.db", "sqlite://",
                                 "postgresql://ops@db/h", "postgres://ops@db/h",
                                 "postgresql+psycopg://ops@db/h"])
def test_every_store_url_scheme_headroom_opens_passes_settings(url: str) -> None:
    assert load_settings(None, db={"url": url, "connect_timeout_s": 2}).db.url == url


def test_a_fleet_lease_shorter_than_a_second_is_one_line_naming_db_lease_duration_s(
        tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("db:\n  lease_duration_s: 0\n")
    with pytest.raises(ConfigError) as error:
        load_settings(config)
    assert str(error.value) == (f"{config}: db.lease_duration_s: Input should be greater than "
                                "or equal to 1, got 0")


@pytest.mark.parametrize("timeout", ["1", "2.9", "0.5"])
def test_a_postgresql_connect_timeout_libpq_would_change_is_one_line_naming_it(
        tmp_path: Path, timeout: str) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(f"db:\n  url: postgresql://ops@db:5432/headroom\n"
                      f"  connect_timeout_s: {timeout}\n")
    with pytest.raises(ConfigError) as error:
        load_settings(config)
    assert str(error.value) == (
        f"{config}: db.connect_timeout_s: PostgreSQL waits whole seconds, at "
        f"least 2 (libpq's connect_timeout), got {float(timeout):g}")


def test_a_sqlite_store_keeps_a_connect_timeout_below_two_seconds_and_postgresql_whole_ones(
        ) -> None:
    assert load_settings(None, db={"connect_timeout_s": 0.5}).db.connect_timeout_s == 0.5
    pg = load_settings(None, db={"url": "postgresql://ops@db/headroom", "connect_timeout_s": 2})
    assert pg.db.connect_timeout_s == 2


def test_where_db_url_came_from_follows_the_settings_precedence(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("db:\n  url: sqlite:///from-file.db\n")
    bare = tmp_path / "bare.yaml"
    bare.write_text("backend: sim\n")
    monkeypatch.delenv("HEADROOM_DB__URL", raising=False)
    assert load_settings().db_url_from == "the default"
    assert load_settings(bare).db_url_from == "the default"
    assert load_settings(config).db_url_from == f"{config}: db.url"
    monkeypatch.setenv("HEADROOM_DB__URL", "sqlite:///from-env.db")
    from_env = load_settings(config)
    assert (from_env.db.url, from_env.db_url_from) == (
        "sqlite:///from-env.db", "environment HEADROOM_DB__URL")
    given = load_settings(config, db={"url": "sqlite:///given.db"})
    assert (given.db.url, given.db_url_from) == ("sqlite:///given.db", "the command line")
    copied = given.model_copy(update={"backend": "sim"})  # serve --dry-run copies the settings
    assert copied.db_url_from == "the command line"


def test_a_store_that_cannot_be_reached_names_where_its_url_came_from(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("db:\n  url: postgresql://nobody@127.0.0.1:1/none\n")
    monkeypatch.delenv("HEADROOM_DB__URL", raising=False)
    settings = load_settings(config)
    with pytest.raises(StoreUnavailable) as caught, db_url_named(settings):
        Store.open(settings.db.url, 1.0)
    message = str(caught.value)
    assert message.startswith("cannot reach database postgresql://nobody@127.0.0.1:1/none: ")
    assert message.endswith(f"(db.url from {config}: db.url)") and "\n" not in message


def test_profile_correction_settings_are_on_by_default_and_a_bad_one_names_its_field() -> None:
    assert load_settings().autoscaling.profile_correction.enabled is True
    with pytest.raises(ConfigError, match=r"autoscaling\.profile_correction\.max_factor"):
        load_settings(autoscaling={"profile_correction": {"max_factor": 0.9}})
    with pytest.raises(ConfigError, match=r"autoscaling\.profile_correction\.min_samples"):
        load_settings(autoscaling={"profile_correction": {"min_samples": 0}})


def test_a_profile_correction_window_longer_than_the_store_keeps_is_refused_naming_both() -> None:
    with pytest.raises(ConfigError) as refused:
        load_settings(db={"retention_s": 1800}, forecast={"history_s": 1200},
                      autoscaling={"profile_correction": {"window_s": 3600}})
    assert ("autoscaling.profile_correction.window_s (3600 s) must be <= db.retention_s "
            "(1800 s)") in str(refused.value)
    kept_forever = load_settings(db={"retention_s": 0},
                                 autoscaling={"profile_correction": {"window_s": 86400}})
    assert kept_forever.autoscaling.profile_correction.window_s == 86400


def test_scale_down_cooldown_and_disruption_budgets_are_off_by_default() -> None:
    safety = load_settings().safety
    assert safety.scale_down_cooldown_s == 0
    assert safety.replica_disruption_budget is None and safety.node_disruption_budget is None
    assert safety.disruption_window_s == 600


@pytest.mark.parametrize(("safety", "field"), [
    ({"scale_down_cooldown_s": -1}, "safety.scale_down_cooldown_s"),
    ({"replica_disruption_budget": -1}, "safety.replica_disruption_budget"),
    ({"node_disruption_budget": 1.5}, "safety.node_disruption_budget"),
    ({"disruption_window_s": 0}, "safety.disruption_window_s"),
    ({"disruption_window_s": True}, "safety.disruption_window_s")],
    ids=["negative cooldown", "negative replica budget", "fractional node budget",
         "zero window", "a boolean for the window"])
def test_a_bad_cooldown_or_disruption_budget_is_one_line_naming_its_field(
        safety: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load_settings(safety=safety)
    assert field in str(refused.value) and "\n" not in str(refused.value)


@pytest.mark.parametrize("value", ["", "   "], ids=["empty", "blank"])
def test_an_empty_forecaster_state_dir_is_refused_naming_it_not_taken_as_the_working_dir(
        monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    # an unset variable in a deployment template: the state files would land in the cwd
    monkeypatch.setenv("HEADROOM_FORECAST__STATE_DIR", value)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert str(caught.value) == (
        "environment variable HEADROOM_FORECAST__STATE_DIR: forecast.state_dir: Value error, "
        "empty: give a directory (or null in the settings file to keep no fitted state)")


def test_a_null_forecaster_state_dir_in_the_file_still_keeps_no_state(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HEADROOM_FORECAST__STATE_DIR", raising=False)  # tests/conftest.py's
    config = tmp_path / "headroom.yaml"
    config.write_text("forecast:\n  state_dir: null\n")
    assert load_settings(config).forecast.state_dir is None


def test_a_number_out_of_range_is_named_with_the_value_given(tmp_path: Path) -> None:
    config = tmp_path / "h.yaml"
    config.write_text("pools:\n  - {name: a100, product: A100-80GB, price_per_gpu_hour: -1}\n")
    with pytest.raises(ConfigError, match=r"h.yaml: pools.0.price_per_gpu_hour: Input should be "
                                          r"greater than or equal to 0, got -1$"):
        load_settings(config)


def _refusal(config: Path, yaml_text: str) -> str:
    """The message with which ``load_settings`` refuses ``config`` holding ``yaml_text``."""
    config.write_text(yaml_text)
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    return str(caught.value)


def test_a_cluster_gpu_budget_below_the_pools_floor_is_refused_naming_both_and_the_sum(
        tmp_path: Path) -> None:
    config = tmp_path / "headroom.yaml"
    assert _refusal(config, "safety: {cluster_gpu_budget: 8}\npools:\n"
                    "  - {name: a100, product: A100-80GB, max_nodes: 8, price_per_gpu_hour: 5}\n"
                    "  - {name: l4, product: L4, gpus_per_node: 4, min_nodes: 5, max_nodes: 8,"
                    " price_per_gpu_hour: 0.8}\n") == (
        f"{config}: safety.cluster_gpu_budget (8 GPUs) must be >= the pools' floor, the sum of "
        "pools[].min_nodes x gpus_per_node (20 GPUs: l4 5 x 4): pools never scale below "
        "min_nodes, so the fleet would hold the floor whatever the budget")
    assert load_settings(config, safety={"cluster_gpu_budget": 20}).safety.cluster_gpu_budget \
        == 20


def test_a_forecast_age_limit_shorter_than_the_forecast_refresh_interval_is_refused_naming_both(
        tmp_path: Path) -> None:
    config = tmp_path / "headroom.yaml"
    assert _refusal(config, "forecast: {interval_s: 3600}\n") == (
        f"{config}: reconcile.max_forecast_age_s (1800 s) must be >= forecast.interval_s "
        "(3600 s): forecasts are refreshed that often, so a shorter age limit would find each "
        "one stale before the next is due")
    # the refresh cadence also when a CronJob refreshes instead of serve
    config.write_text("forecast: {interval_s: 3600, refresh_in_serve: false}\n")
    with pytest.raises(ConfigError, match=r"must be >= forecast\.interval_s"):
        load_settings(config)
    config.write_text("forecast: {interval_s: 1800}\n")
    assert load_settings(config).forecast.interval_s == 1800


def test_the_retired_lookahead_key_is_refused_naming_the_settings_that_set_the_window(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    retired = ("unknown key (retired: nothing read it; the predictive policy's forecast window "
               "is autoscaling.reaction_s + the next rung's wake (autoscaling.cached_start_p90_s "
               "in the reconcile loop), KEDA's scaler's is autoscaling.keda_lookahead_s; remove "
               "the key)")
    config = tmp_path / "headroom.yaml"
    config.write_text("reconcile: {lookahead_s: 600}\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    assert str(caught.value) == f"{config}: reconcile.lookahead_s: {retired}"
    monkeypatch.setenv("HEADROOM_RECONCILE__LOOKAHEAD_S", "600")
    with pytest.raises(ConfigError) as caught:
        load_settings(None)
    assert str(caught.value) == ("environment variable HEADROOM_RECONCILE__LOOKAHEAD_S: "
                                 f"reconcile.lookahead_s: {retired}")


@pytest.mark.parametrize(("name", "expected"), [
    ("HEADROOM_SAFETY__DRY_RUN__ENABLED", "environment variable "
     "HEADROOM_SAFETY__DRY_RUN__ENABLED: safety.dry_run is a single value, with no keys below "
     "it; did you mean HEADROOM_SAFETY__DRY_RUN?"),
    ("HEADROOM_RECONCILE__INTERVAL_S__SECONDS", "environment variable "
     "HEADROOM_RECONCILE__INTERVAL_S__SECONDS: reconcile.interval_s is a single value, with no "
     "keys below it; did you mean HEADROOM_RECONCILE__INTERVAL_S?"),
    ("HEADROOM_AUTOSCALING__PROFILE_CORRECTION__ENABLED__ON", "environment variable "
     "HEADROOM_AUTOSCALING__PROFILE_CORRECTION__ENABLED__ON: autoscaling.profile_correction."
     "enabled is a single value, with no keys below it; did you mean "
     "HEADROOM_AUTOSCALING__PROFILE_CORRECTION__ENABLED?"),
    ("HEADROOM_AUTOSCALING__TENANT_GPU_BUDGETS__ACME__GPUS", "environment variable "
     "HEADROOM_AUTOSCALING__TENANT_GPU_BUDGETS__ACME__GPUS: autoscaling.tenant_gpu_budgets.acme "
     "is a single value, with no keys below it; did you mean "
     "HEADROOM_AUTOSCALING__TENANT_GPU_BUDGETS__ACME?"),
    ("HEADROOM_POOLS__0__NAME", "environment variable HEADROOM_POOLS__0__NAME: pools is a list, "
     "with no keys below it; give it whole as JSON in HEADROOM_POOLS"),
    ("HEADROOM_RECONCILE__INTERVALS__SECONDS", "environment variable "
     "HEADROOM_RECONCILE__INTERVALS__SECONDS: reconcile.intervals: unknown key; did you mean "
     "HEADROOM_RECONCILE__INTERVAL_S?"),
], ids=["below a boolean", "below a number", "below a value of a nested group",
        "below a value of a mapping", "into a list", "below an unknown key"])
def test_an_environment_variable_below_a_single_value_is_named_not_the_config_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, expected: str) -> None:
    config = tmp_path / "headroom.yaml"
    config.write_text("db: {retention_s: 0}\n")
    monkeypatch.setenv(name, "15")
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    assert str(caught.value) == expected


def test_an_environment_variable_naming_a_key_of_a_mapping_still_sets_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEADROOM_AUTOSCALING__TENANT_GPU_BUDGETS__ACME", "4")
    assert load_settings(None).autoscaling.tenant_gpu_budgets == {"acme": 4.0}
