# -*- coding: utf-8 -*-
# Copyright: fleetqual.storage developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side shared code of fleetqual.storage, in rooms by concern (docs/architecture.md,
"Floors and rooms"): each package here says in its ``__init__.py`` what lives there and which
rooms it may import. Code here imports module_utils and plugin_utils, never a plugin; the
plugins (action, filter, callback, lookup) import it.

Pure Python (no Ansible runtime state) except the actions' shared code in ``remote``, so the
same code serves the filters used by the ``qualify`` role, the actions and the
``qualify_report`` callback, which imports it directly.
"""
