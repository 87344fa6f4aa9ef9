"""The CSV benchmark runs end to end on a tiny size (speed is printed by `pypto bench`, never asserted)."""


from pypto_core.bench import readers_csv
from pypto_core.formats.kernel_csv import read_kernels


def test_generated_copy_keeps_exact_increasing_times(tmp_path):
    path = tmp_path / "kd.csv"
    gen = readers_csv.generate(path, 2)
    kernels, warnings = read_kernels(path)
    assert warnings == [] and kernels.num_rows == gen["rows"] and gen["rows"] > 2463
    # copy 1 of the first row: shifted by one capture span, the ns digits untouched
    starts = kernels["start_ns"]
    assert starts[0].as_py() == 1764246877073569640
    assert starts[2463].as_py() % 1000 == 640 and starts[2463].as_py() > starts[2462].as_py()


def test_run_reports_rates_and_memory(tmp_path):
    out = readers_csv.run([1], tmp_path)
    r = out["results"][0]
    assert "error" not in r, r
    assert r["rows_match"] and r["csv_mb_per_s"] > 0 and r["csv_peak_rss_mb"] > 0 and r["parquet_load_s"] >= 0
    assert list(tmp_path.iterdir()) == []  # generated inputs are removed
