"""The wheel ships the presets: build it, install it in a fresh venv, run tcalc elsewhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv

from conftest import REPO


def test_wheel_installs_and_finds_presets(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(REPO)],
        check=True, capture_output=True, text=True,
    )
    (wheel,) = dist.glob("transformer_calc-*.whl")
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    bin_dir = env_dir / ("Scripts" if os.name == "nt" else "bin")
    subprocess.run(
        [str(bin_dir / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)],
        check=True, capture_output=True, text=True,
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        [str(bin_dir / "tcalc"), "presets", "--format", "json"],
        cwd=elsewhere, env=env, check=True, capture_output=True, text=True,
    )
    rows = json.loads(out.stdout)
    assert {"gpt2", "gpt3", "llama-2-7b", "falcon-40b"} <= {r["name"] for r in rows}
    out = subprocess.run(
        [str(bin_dir / "tcalc"), "hardware", "--format", "json"],
        cwd=elsewhere, env=env, check=True, capture_output=True, text=True,
    )
    assert len(json.loads(out.stdout)) >= 17
    # the JSON form built into the wheel is exactly the YAML (hatch_build.py)
    import zipfile

    import yaml

    with zipfile.ZipFile(wheel) as zf:
        for name in ("models", "hardware", "prices"):
            built = json.loads(zf.read(f"transformer_calc/presets/{name}.json"))
            assert built == yaml.safe_load((REPO / "presets" / f"{name}.yaml").read_text())
    # and tcalc writes nothing: no cache directory appears
    home = tmp_path / "home"
    home.mkdir()
    subprocess.run([str(bin_dir / "tcalc"), "params", "--preset", "gpt2"], cwd=elsewhere,
                   env={**env, "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache")}, check=True,
                   capture_output=True)
    assert not any(home.rglob("*"))
    # tcalc web's templates and vendored assets ship in the wheel; without the extras, tcalc web and
    # tcalc mcp say which extra to install (one Error: line, exit 2)
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    for asset in ("web/templates/page.html", "web/templates/index.html", "web/templates/base.html",
                  "web/static/tcalc.css", "web/static/tcalc.js"):
        assert f"transformer_calc/{asset}" in names, asset
    for command in ("web", "mcp"):
        out = subprocess.run([str(bin_dir / "tcalc"), command], cwd=elsewhere, env=env, capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == 2 and out.stderr.startswith(f"Error: tcalc {command} needs the {command} extra"), out.stderr
        assert f"pip install 'transformer-calc[{command}]'" in out.stderr
