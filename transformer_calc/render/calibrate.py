"""`tcalc calibrate` as tables, the profile file it writes, and the line a calibrated answer shows."""

from __future__ import annotations

from typing import Any

from transformer_calc.render.common import styled_table


def _pct(x: float) -> str:
    return f"{100 * x:+.1f} %"


def calibrate_table(r: Any) -> Any:
    """The fitted constants (value, uncertainty, default, bounds), then each run's error with the
    default profile, calibrated, and left out of the fit (a CalibrateResult)."""
    from rich.console import Group
    from rich.text import Text

    c = styled_table(f"Calibrated constants ({len(r.runs)} measurements)", "constant", "fitted", "± (jackknife)",
                     "default", "bounds")
    for k in r.constants:
        c.add_row(k.name, f"{k.value:.4g}", f"{k.uncertainty:.2g}", f"{k.default:.4g}", f"[{k.lower:.3g}, {k.upper:.3g}]")
    on = r.profile.fitted_on
    t = styled_table(f"Runs on {', '.join(on.gpus)} ({', '.join(on.frameworks)}; {', '.join(on.dtypes)}): "
                     "error = measured / predicted time − 1", "run", "metric", "measured", "default", "calibrated",
                     "left out")
    for x in r.runs:
        t.add_row(x.id, x.metric, f"{x.measured:.4g}", _pct(x.error_default), _pct(x.error_calibrated),
                  _pct(x.error_left_out))
    t.add_section()
    t.add_row("median |error|", "", "", f"{100 * r.median_abs_error_default:.1f} %",
              f"{100 * r.median_abs_error_calibrated:.1f} %", f"{100 * r.median_abs_error_left_out:.1f} %", style="bold")
    tail = [f"profile written to {r.profile_file}: use it with --profile {r.profile_file}" if r.profile_file
            else "profile not written (give --output FILE)"]
    return Group(c, t, Text("\n".join(tail)))


def profile_yaml(profile: Any) -> str:
    """The profile file: the Profile section as YAML, with a header saying what wrote it."""
    from transformer_calc.render.common import to_yaml

    head = ("# A tcalc time profile written by `tcalc calibrate`; give it to any time command with --profile FILE.\n"
            "# constants: the fitted values; uncertainty: their jackknife standard errors (docs/cli.md).\n")
    return head + to_yaml(profile.model_dump(mode="json"))


def calibration_line(cal: Any) -> str:
    """One line: the answer is calibrated, on what, how far off left out."""
    on = cal.fitted_on
    consts = ", ".join(f"{k}={v:.3g}" for k, v in cal.constants.items())
    return (f"calibrated with {cal.profile_file} ({consts}): fitted on {on.runs} runs ({', '.join(on.gpus)}; "
            f"{', '.join(on.frameworks)}; {', '.join(on.dtypes)}), leave-one-out median |error| "
            f"{100 * cal.median_abs_error_left_out:.1f} %" + ("" if cal.matches else
                                                              "; this answer is outside what it was fitted on"))
