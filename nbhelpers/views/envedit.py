"""An env-var editor for notebooks, driven by the catalog: typed inputs, refusals with reasons, live lint.

    ed = env_editor(preset="basic")    # shows the widget; ed.env / ed.timeout_s / ed.config() after edits
    ed.set("NCCL_DEBUG", "LOUD")        # False: refused, ed.status.value says why (same path as the Set button)

A value is refused *before* anything launches when the linter calls it an error (not an integer, not
an accepted value, out of range, an interface this host lacks, a name nothing reads), when NCCL retired
the name (it has no effect), or when the name is not a variable the catalog or NCCL/PyTorch know.  Warnings (deprecated names, debug settings) are
accepted and shown in the live lint table.  Every answer goes into ``ipywidgets.HTML`` widgets (never an
``Output`` widget, which stalls headless runs), so tests drive the widget objects without a browser.
"""
from __future__ import annotations

import html

from nbhelpers.diagnosis import envcatalog as ec
from nbhelpers.diagnosis.lint import Finding, lint_env
from nbhelpers.runtime.launchconfig import Config, parse_timeout

_LEVEL_COLOR = {"error": "#d62728", "warning": "#ff7f0e", "info": "#1f77b4"}


def var_html(name: str) -> str:
    """What the catalog says about ``name``: meaning, type, default, accepted values, source."""
    var = ec.lookup(name)
    if var is None:
        wrong = ec.wrong_name(name)
        if wrong is not None:
            return (f"<b>{html.escape(name)}</b>: <span style='color:#d62728'>{html.escape(wrong.why)}</span> "
                    f"{html.escape(wrong.instead)}")
        known = " (a real variable the catalog does not describe)" if ec.is_known(name) else ""
        return f"<b>{html.escape(name)}</b>{known}" if name else "<i>choose a variable</i>"
    default = var.default if var.default is not None else (var.default_note or "unset")
    parts = [f"<b>{html.escape(var.name)}</b> <code>{var.type}</code>: {html.escape(var.meaning)}",
             f"default: <code>{html.escape(default)}</code>"]
    if var.allowed:
        parts.append("accepted: " + ", ".join(f"<code>{html.escape(a)}</code>" for a in var.allowed))
    if var.minimum is not None or var.maximum is not None:
        parts.append(f"range: {var.minimum if var.minimum is not None else '-∞'} to "
                     f"{var.maximum if var.maximum is not None else '∞'}")
    if var.deprecated_alias_of:
        parts.append(f"<span style='color:#ff7f0e'>deprecated: use {var.deprecated_alias_of}</span>")
    if var.debug_only:
        parts.append("<i>debugging setting</i>")
    parts.append(f"<a href='{html.escape(var.source)}' target='_blank'>source</a>")
    return " · ".join(parts)


def findings_html(findings: list[Finding], empty: str = "No findings: nothing wrong with these values.") -> str:
    if not findings:
        return f"<p style='color:#2ca02c'>{html.escape(empty)}</p>"
    rows = "".join(f"<tr><td style='color:{_LEVEL_COLOR[f.level]}'>{f.level}</td><td><code>{html.escape(f.name)}"
                   f"</code></td><td>{html.escape(f.rule)}</td><td>{html.escape(f.message)}</td>"
                   f"<td>{html.escape(f.fix)}</td></tr>" for f in findings)
    return (f"<table><tr><th>level</th><th>variable</th><th>rule</th><th>finding</th><th>fix</th></tr>{rows}"
            f"</table>")


class EnvEditor:
    """The editor's state and widgets. ``widget`` is the box to display; the parts are attributes."""

    def __init__(self, env: dict | None = None, timeout_s: int = 30, name: str = "edited",
                 interfaces: list[dict] | None = None, worker: str = "probe", nproc: int = 2):
        import ipywidgets as w

        from nbhelpers.runtime import fingerprint
        from nbhelpers.scenarios.presets import presets

        self.env: dict[str, str] = {}
        self.timeout_s = timeout_s
        self.name, self.worker, self.nproc = name, worker, nproc
        self.interfaces = fingerprint.interfaces() if interfaces is None else list(interfaces)
        self.presets = presets(nproc)
        self.last_result = None

        self.preset = w.Dropdown(options=["(keep)"] + list(self.presets), value="(keep)", description="preset")
        self.var = w.Combobox(options=sorted(ec.CATALOG), placeholder="variable, e.g. NCCL_DEBUG",
                              description="variable", ensure_option=False)
        self.doc = w.HTML(var_html(""))
        self.value = w.Combobox(options=[], placeholder="value", description="value", ensure_option=False)
        self.check = w.HTML()
        self.set_button = w.Button(description="Set", button_style="primary", icon="check")
        self.remove_button = w.Button(description="Remove", icon="trash")
        self.timeout = w.Text(value=str(timeout_s), description="timeout s",
                              tooltip="init_process_group(timeout=...): whole seconds")
        self.timeout_check = w.HTML()
        self.status = w.HTML()
        self.table = w.HTML()
        self.lint = w.HTML()
        self.export = w.Textarea(layout=w.Layout(width="100%", height="180px"))
        self.launch_button = w.Button(description=f"Run {worker}", icon="play", button_style="success")
        self.result = w.HTML()

        self.preset.observe(self._on_preset, names="value")
        self.var.observe(self._on_var, names="value")
        self.value.observe(self._on_value, names="value")
        self.timeout.observe(self._on_timeout, names="value")
        self.set_button.on_click(lambda _: self.set(self.var.value.strip(), self.value.value.strip()))
        self.remove_button.on_click(lambda _: self.remove(self.var.value.strip()))
        self.launch_button.on_click(lambda _: self.launch())

        for k, v in (env or {}).items():
            if not self.set(k, v):
                raise ValueError(f"initial value refused: {self.status.value}")
        self.status.value = ""
        self._refresh()
        self.widget = w.VBox([
            w.HTML("<b>Environment editor</b> (values are checked before they are accepted)"), self.preset,
            w.HBox([self.var, self.value, self.set_button, self.remove_button]), self.doc, self.check,
            w.HBox([self.timeout, self.timeout_check]), self.status,
            w.HTML("<b>Current config</b>"), self.table, w.HTML("<b>Lint (live)</b>"), self.lint,
            w.HTML("<b>Export</b>"), self.export, self.launch_button, self.result])

    def _ipython_display_(self):
        from IPython.display import display

        display(self.widget)

    # ------------------------------------------------------------------ checks
    def refusal(self, name: str, value: str) -> str:
        """The reason ``name=value`` is refused, or "" when it is accepted."""
        if not name:
            return "Choose a variable first."
        if not ec.is_known(name) and ec.wrong_name(name) is None:
            found = lint_env({name: value}, interfaces=self.interfaces)
            hint = found[0].message if found else ""
            return (f"{name} is not a variable NCCL, PyTorch or Gloo read (not in the catalog). {hint}").strip()
        if value == "":
            return f"Give {name} a value (use Remove to unset it)."
        errors = [f for f in lint_env({**self.env, name: value}, interfaces=self.interfaces)
                  if f.name == name and (f.level == "error" or f.rule == "retired")]  # retired: has no effect
        return " ".join(f"{f.message} Fix: {f.fix}" for f in errors)

    def set(self, name: str, value: str) -> bool:
        """Accept ``name=value`` if it passes the checks; otherwise leave the env as it was and say why."""
        name, value = str(name).strip(), str(value).strip()
        why = self.refusal(name, value)
        if why:
            self.status.value = f"<span style='color:#d62728'><b>Refused {html.escape(name)}={html.escape(value)}:" \
                                f"</b> {html.escape(why)}</span>"
            return False
        self.env[name] = value
        self.status.value = f"<span style='color:#2ca02c'>Set {html.escape(name)}={html.escape(value)}.</span>"
        self._refresh()
        return True

    def remove(self, name: str) -> bool:
        if name in self.env:
            del self.env[name]
            self.status.value = f"Removed {html.escape(name)}."
            self._refresh()
            return True
        self.status.value = f"{html.escape(name)} is not set."
        return False

    def set_timeout(self, text) -> bool:
        seconds, why = parse_timeout(text)
        if seconds is None:
            self.timeout_check.value = f"<span style='color:#d62728'><b>Refused:</b> {html.escape(why)}</span>"
            return False
        self.timeout_s = seconds
        self.timeout_check.value = f"<span style='color:#2ca02c'>{seconds} s</span>"
        self._refresh()
        return True

    def attempts(self, pairs) -> "object":
        """Try each (name, value) through :meth:`set` (``name`` "timeout" tries the timeout field); a table."""
        import pandas as pd

        rows = []
        for name, value in pairs:
            if name == "timeout":
                ok = self.set_timeout(value)
                why = "" if ok else parse_timeout(value)[1]
            else:
                ok = self.set(name, value)
                why = "" if ok else self.refusal(name, value)
            rows.append({"variable": name, "value": value, "accepted": ok, "reason": why})
        return pd.DataFrame(rows)

    def load_preset(self, name: str) -> None:
        p = self.presets[name]
        self.env = dict(p.env)
        self.timeout_s, self.name = p.timeout_s, p.name
        self.timeout.value = str(p.timeout_s)
        self.status.value = f"Loaded preset <b>{html.escape(name)}</b>: {html.escape(p.summary)}"
        self._refresh()

    def config(self) -> Config:
        """The edited config, checked (raises ConfigError with the reasons when it has errors)."""
        return Config(self.name, dict(self.env), self.timeout_s).check(self.interfaces)

    def launch(self, **probe_kw):
        """Check the config, then run the worker with it (refused configs start nothing)."""
        from nbhelpers.errors import ConfigError
        from nbhelpers.runtime.launcher import launch

        try:
            cfg = self.config()
        except ConfigError as exc:
            self.result.value = f"<pre style='color:#d62728'>{html.escape(str(exc))}</pre>"
            return None
        self.result.value = f"<i>running {html.escape(self.worker)} on {self.nproc} ranks ...</i>"
        res = launch(self.worker, ["--timeout", str(cfg.timeout_s), *probe_kw.pop("args", [])], nproc=self.nproc,
                     env=cfg.env, live=False, name=f"{self.worker}-{cfg.name}",
                     timeout=probe_kw.pop("run_timeout", max(60.0, 3 * cfg.timeout_s + 30)), **probe_kw)
        self.last_result = res
        self.result.value = res._repr_html_()
        return res

    # ------------------------------------------------------------------ widget events
    def _on_preset(self, change) -> None:
        if change["new"] in self.presets:
            self.load_preset(change["new"])

    def _on_var(self, change) -> None:
        name = change["new"].strip()
        self.doc.value = var_html(name)
        var = ec.lookup(name)
        if var is None:
            self.value.options, self.value.placeholder = (), "value"
        elif var.type == "ifname":
            self.value.options = tuple(i["name"] for i in self.interfaces)
            self.value.placeholder = "interface name"
        elif var.type in ("int", "port"):
            self.value.options = ()
            lo = "" if var.minimum is None else f" ≥ {var.minimum}"
            self.value.placeholder = f"whole number{lo}"
        else:
            self.value.options = tuple(var.allowed)
            self.value.placeholder = var.default or "value"
        if name in self.env:
            self.value.value = self.env[name]
        self._on_value({"new": self.value.value})

    def _on_value(self, change) -> None:
        name, value = self.var.value.strip(), str(change["new"]).strip()
        if not name or not value:
            self.check.value = ""
            return
        why = self.refusal(name, value)
        self.check.value = (f"<span style='color:#d62728'>✘ would be refused: {html.escape(why)}</span>" if why
                            else "<span style='color:#2ca02c'>✔ acceptable</span>")

    def _on_timeout(self, change) -> None:
        self.set_timeout(change["new"])

    def _refresh(self) -> None:
        rows = "".join(f"<tr><td><code>{html.escape(k)}</code></td><td><code>{html.escape(v)}</code></td></tr>"
                       for k, v in sorted(self.env.items()))
        self.table.value = (f"<table><tr><th>variable</th><th>value</th></tr>{rows}"
                            f"<tr><td>process-group timeout</td><td>{self.timeout_s} s (in code)</td></tr></table>")
        self.lint.value = findings_html(lint_env(self.env, interfaces=self.interfaces))
        cfg = Config(self.name, dict(self.env), self.timeout_s)
        self.export.value = cfg.shell_snippet() + "\n\n# or in one line:\n" + cfg.torchrun_command("train.py",
                                                                                                 nproc=self.nproc)


def env_editor(preset: str | None = None, env: dict | None = None, timeout_s: int = 30, **kw) -> EnvEditor:
    """An :class:`EnvEditor`, optionally starting from a preset (display it by leaving it last in a cell)."""
    ed = EnvEditor(env=env, timeout_s=timeout_s, **kw)
    if preset:
        ed.preset.value = preset
    return ed
