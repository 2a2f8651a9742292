# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rendering, every format from the fleet dict alone so each re-renders from fleet.json: the
formats of a run and publish (publish), the report's options (config), the one column table
(rows), the terminal (render_text), HTML and its SVG charts (render_html, render_svg),
Markdown, JUnit XML, the arrays in every format (arrays), Prometheus textfiles (prometheus),
the templates' Jinja2 environment (templating) and what a host that did not pass prints
(brief).

May import: module_utils; plugin_utils: common, history, metrics, diagnostics, judge, array, fleet.
"""
