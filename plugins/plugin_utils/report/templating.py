# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The private Jinja2 environment of the report templates (the collection's top-level
templates/ directory; no Ansible templar) and the filters they use: numbers (common/fmt.py),
text safe for XML 1.0 (``xml_text``) and Markdown table cells (``md_cell``)."""

from __future__ import annotations

import os
import re

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.fmt import DASH
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.fmt import cell_ms as fmt_ms
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.fmt import cell_num as fmt_num
from ansible_collections.fleetqual.storage.plugins.plugin_utils.common.fmt import cell_pct as fmt_pct
from ansible_collections.fleetqual.storage.plugins.plugin_utils.history.drift import text_lines as history_lines


# <collection>/plugins/plugin_utils/report/templating.py -> <collection>/templates
TEMPLATES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))),
                             "templates")

_ENVS = {}

_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def xml_text(value):
    """Text safe for XML 1.0 (control characters dropped); escaping is left to autoescape."""
    return _XML_BAD.sub("", "" if value is None else str(value))


def md_cell(value):
    text = DASH if value is None or value == "" else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def _env(kind):
    env = _ENVS.get(kind)
    if env is None:
        env = Environment(loader=FileSystemLoader(TEMPLATES_DIR), undefined=StrictUndefined,
                          autoescape=select_autoescape(enabled_extensions=("html", "xml", "j2"),
                                                       default_for_string=True),
                          trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
        if kind == "md":
            env.autoescape = False
        env.filters.update(num=fmt_num, ms=fmt_ms, pct=fmt_pct, xml=xml_text, md=md_cell,
                           history=history_lines)     # a host against its own history
        _ENVS[kind] = env
    return env


def render_template(kind, template_name, **ctx):
    return _env(kind).get_template(template_name).render(**ctx)
