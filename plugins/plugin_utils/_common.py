# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Old name of vocabulary.py (issue 19), kept while the modules that import it move to
vocabulary.py; nothing is defined here."""

from ansible_collections.fleetqual.storage.plugins.plugin_utils.vocabulary import (  # noqa: F401
    MODES, OPS, PCT_SOURCE, PCTS, READ_MODES, WRITE_MODES, dig, human_size, parse_size, type_name)
