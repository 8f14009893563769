"""The site's only stylesheet and script, written to SITE/assets/. The script filters the
suite matrix's sub-cells from the URL's query (so a view can be linked), hides the models
left with none, and writes the filters back to it; it reads values through `dataset` and
`textContent`, never `innerHTML`."""

from __future__ import annotations

from harness.store.status import Status

_STATUS_CSS = "\n".join(
    f".st-{s.value}{{background:{s.colour.fill};color:{s.colour.text}}}" for s in Status
)

CSS = (
    """body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#222}
nav{background:#24292f;padding:.5em 1em}nav a{color:#fff;margin-right:1em}
main{padding:0 1em 2em}table{border-collapse:collapse;margin:.5em 0}
th,td{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}
thead th{background:#f3f3f3}.none{color:#888}code{white-space:pre-wrap;word-break:break-all}
.spark,.chart{vertical-align:middle;color:#0366d6}.band{fill:#0366d6;opacity:.15}
.filters label{margin-right:1em}.timeline .tick{display:inline-block;width:6px;height:14px;margin-right:1px}
tr.hidden,.sub.hidden{display:none}
#matrix td{min-width:8em}.sub{display:block;margin:1px 0;padding:1px 4px;text-decoration:none;white-space:nowrap}
.sub small{opacity:.85}section.channel{display:inline-block;vertical-align:top;margin-right:2em}
"""
    + _STATUS_CSS
    + "\n"
)

JS = """'use strict';
// The suite matrix's filters: the URL's query sets them, each change writes them back. A
// filter hides the sub-cells (one per cell) it does not match, and a model row with none.
(function () {
  const form = document.getElementById('filters');
  const table = document.getElementById('matrix');
  if (!form || !table) { return; }
  const controls = Array.from(form.querySelectorAll('[data-filter]'));
  const rows = Array.from(table.tBodies[0].rows);
  const subs = Array.from(table.querySelectorAll('.sub'));
  const shown = document.getElementById('shown');
  function matches(sub, wanted) {
    return Object.keys(wanted).every(function (key) {
      const have = sub.dataset[key] || '';
      return key === 'q' ? have.indexOf(wanted[key].toLowerCase()) >= 0 : have === wanted[key];
    });
  }
  function apply() {
    const wanted = {};
    controls.forEach(function (c) { if (c.value) { wanted[c.dataset.filter] = c.value; } });
    let count = 0;
    subs.forEach(function (sub) {
      const keep = matches(sub, wanted);
      sub.classList.toggle('hidden', !keep);
      if (keep) { count += 1; }
    });
    let models = 0;
    rows.forEach(function (row) {
      const keep = row.querySelector('.sub:not(.hidden)') !== null;
      row.classList.toggle('hidden', !keep);
      if (keep) { models += 1; }
    });
    shown.textContent = count + ' of ' + subs.length + ' cells, ' + models + ' of ' +
      rows.length + ' models';
    const query = new URLSearchParams(wanted).toString();
    history.replaceState(null, '', query ? '?' + query : location.pathname);
  }
  const start = new URLSearchParams(location.search);
  controls.forEach(function (c) {
    const value = start.get(c.dataset.filter);
    if (value !== null) { c.value = value; }
    c.addEventListener(c.tagName === 'INPUT' ? 'input' : 'change', apply);
  });
  form.addEventListener('submit', function (event) { event.preventDefault(); });
  apply();
}());
"""
