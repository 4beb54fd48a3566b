"""The report's page shell: inline stylesheet, the table-sorting script and the layout."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

STYLE = """
:root{--ink:#1f2937;--muted:#6b7280;--line:#e5e7eb;--soft:#f3f4f6;--bg:#f7f8fa;
--accent:#0072b2;--bar:rgba(0,114,178,.16)}
*{box-sizing:border-box}
html{-webkit-text-size-adjust:100%}
body{margin:0;background:var(--bg);color:var(--ink);font:14px/1.5 -apple-system,
BlinkMacSystemFont,"Segoe UI",Roboto,"Helvetica Neue",Arial,"Noto Sans","Liberation Sans",
"DejaVu Sans",sans-serif;font-variant-numeric:tabular-nums}
nav{position:sticky;top:0;z-index:5;background:rgba(255,255,255,.94);
border-bottom:1px solid var(--line);backdrop-filter:blur(6px)}
nav .in{max-width:1240px;margin:0 auto;padding:0 24px;display:flex;gap:4px;overflow-x:auto}
nav a{color:var(--muted);text-decoration:none;padding:10px 10px;font-size:13px;white-space:nowrap;
border-bottom:2px solid transparent}
nav a:hover{color:var(--ink);border-bottom-color:var(--accent)}
main{max-width:1240px;margin:0 auto;padding:20px 24px 48px}
header{padding:8px 0 4px}
.kicker{margin:0;color:var(--accent);font-weight:600;font-size:12px;letter-spacing:.08em;
text-transform:uppercase}
h1{margin:2px 0 12px;font-size:26px;font-weight:650;letter-spacing:-.01em;overflow-wrap:anywhere}
h2{margin:0 0 4px;font-size:19px;font-weight:650}
.meta{display:grid;grid-template-columns:repeat(auto-fill,minmax(220px,1fr));gap:8px 20px;
margin:0 0 16px}
.meta div{min-width:0}
.meta div.wide{grid-column:span 2}
.meta dt{font-size:11px;color:var(--muted);text-transform:uppercase;letter-spacing:.06em}
.meta dd{margin:0;overflow-wrap:anywhere;font-size:13px}
.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"DejaVu Sans Mono",monospace;
font-size:12px!important}
.tiles{display:grid;grid-template-columns:repeat(auto-fit,minmax(170px,1fr));gap:12px;
margin:0 0 20px}
.tile{background:#fff;border:1px solid var(--line);border-radius:10px;padding:12px 14px}
.tile b{display:block;font-size:22px;font-weight:650;letter-spacing:-.01em}
.tile span{display:block;color:var(--muted);font-size:12.5px;line-height:1.35}
.tile small{display:block;color:var(--accent);font-size:12px;margin-top:2px}
section{background:#fff;border:1px solid var(--line);border-radius:12px;padding:20px 22px;
margin:0 0 20px;scroll-margin-top:52px}
.lead{margin:0 0 14px;color:#4b5563;max-width:900px}
.note{color:var(--muted);font-size:12.5px;margin:4px 0 10px}
.empty{color:var(--muted);font-style:italic}
figure{margin:0 0 14px}
.legend{display:flex;flex-wrap:wrap;gap:6px 16px;margin:0 0 8px;font-size:12.5px;color:#374151}
.legend .key{display:inline-flex;align-items:center;gap:6px}
.legend i{display:inline-block;width:11px;height:11px;border-radius:50%;
border:2px solid transparent}
.legend i.hollow{background:#fff}
.grid-charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(340px,1fr));gap:14px;
margin:0 0 16px}
.grid-charts svg{border:1px solid var(--line);border-radius:8px}
svg.chart{display:block;width:100%;height:auto}
svg.chart text{font-family:inherit;font-size:11px;fill:#374151}
svg.chart .row-title{font-weight:600;font-size:12px;fill:var(--ink)}
svg.chart .row-sub,svg.chart .note{fill:var(--muted);font-size:10.5px}
svg.chart .panel-title{font-weight:600;font-size:12px;fill:var(--ink)}
svg.chart .series{font-size:10.5px}
svg.chart .tick{fill:var(--muted);font-size:10.5px}
svg.chart .axis-label{fill:var(--muted);font-size:11.5px}
svg.chart .value{font-size:10.5px;font-weight:600}
svg.chart .inbar{font-size:10.5px;font-weight:600}
svg.chart .grid{stroke:#eceef1;stroke-width:1}
svg.chart .axis{stroke:#9ca3af;stroke-width:1}
svg.chart .band{fill:#fafbfc}
svg.chart .whisker{stroke-width:2.2;stroke-linecap:round;opacity:.55}
svg.chart .envelope{fill:none;stroke:#9ca3af;stroke-width:1.6;stroke-dasharray:5 3}
svg.chart .component{fill:#fff;stroke:#6b7280;stroke-width:1.5}
svg.chart .match{stroke-width:1.4;stroke-dasharray:3 2}
svg.chart .range{stroke:#cbd5e1;stroke-width:3;stroke-linecap:round}
.table-wrap{overflow-x:auto;border:1px solid var(--line);border-radius:8px;max-height:560px;
overflow-y:auto}
table{border-collapse:collapse;width:100%;font-size:12px}
td.bar{min-width:64px}
th,td{padding:5px 6px;text-align:left;border-bottom:1px solid var(--soft)}
td{white-space:nowrap}
th{vertical-align:bottom;line-height:1.25}
thead th{position:sticky;background:#f9fafb;color:#374151;font-weight:600;z-index:1}
thead tr:first-child th{top:0}
thead tr.groups th{font-size:11px;color:var(--muted);text-transform:uppercase;
letter-spacing:.05em;border-bottom:0;padding-bottom:0}
thead tr.groups th.grp{border-left:1px solid var(--line);text-align:center}
thead tr.groups + tr th{top:21px}
thead tr.groups th{white-space:nowrap}
thead tr:last-child th{cursor:pointer;user-select:none;border-bottom:1px solid var(--line)}
thead tr:last-child th:hover{color:var(--accent)}
th[aria-sort=ascending]::after{content:" ▲";font-size:9px;color:var(--accent)}
th[aria-sort=descending]::after{content:" ▼";font-size:9px;color:var(--accent)}
td.num,th.num{text-align:right}
td.bar{background:linear-gradient(90deg,var(--bar) calc(var(--v)*100%),transparent 0)}
tbody tr:nth-child(even){background:#fbfbfc}
tbody tr:hover{background:#eef6fb}
footer{color:var(--muted);font-size:12px;text-align:center;padding:8px}
@media (max-width:760px){main{padding:12px}section{padding:14px}h1{font-size:21px}}
@media print{nav{display:none}section{break-inside:avoid;border:0}}
"""

# Sorts tables by a clicked header; numbers sort by data-v, blanks ("—") always last.
SCRIPT = """
(function(){
  function key(cell){
    var v = cell.getAttribute('data-v');
    if (v !== null) return v === '' ? null : parseFloat(v);
    return cell.textContent.trim().toLowerCase();
  }
  function sortBy(table, th, idx){
    var dir = th.getAttribute('aria-sort') === 'ascending' ? 'descending' : 'ascending';
    var heads = table.tHead.rows[table.tHead.rows.length - 1].cells;
    for (var i = 0; i < heads.length; i++) heads[i].setAttribute('aria-sort', 'none');
    th.setAttribute('aria-sort', dir);
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var sign = dir === 'ascending' ? 1 : -1;
    rows.forEach(function(r, i){ r._pos = i; });
    rows.sort(function(a, b){
      var x = key(a.cells[idx]), y = key(b.cells[idx]);
      if (x === null || y === null) {
        if (x === y) return a._pos - b._pos;
        return x === null ? 1 : -1;
      }
      if (x < y) return -sign;
      if (x > y) return sign;
      return a._pos - b._pos;
    });
    rows.forEach(function(r){ body.appendChild(r); });
  }
  var tables = document.querySelectorAll('table.sortable');
  Array.prototype.forEach.call(tables, function(table){
    var heads = table.tHead.rows[table.tHead.rows.length - 1].cells;
    Array.prototype.forEach.call(heads, function(th, idx){
      th.tabIndex = 0;
      th.setAttribute('aria-sort', 'none');
      th.addEventListener('click', function(){ sortBy(table, th, idx); });
      th.addEventListener('keydown', function(e){
        if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); sortBy(table, th, idx); }
      });
    });
    table.setAttribute('data-sortable', 'ready');
  });
})();
"""


def page(*, title: str, header: str, nav: Sequence[tuple[str, str]], body: str) -> str:
    """Assemble the document; every argument but `title` is already-escaped HTML."""
    links = "".join(f'<a href="#{sid}">{escape(label)}</a>' for sid, label in nav)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>"
        f'<nav><div class="in"><a href="#header">Run</a>{links}</div></nav>'
        f"<main>{header}{body}</main>"
        "<footer>Generated by judgeline. Self-contained: no external resources.</footer>"
        f"<script>{SCRIPT}</script></body></html>\n"
    )
