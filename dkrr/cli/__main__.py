"""``python -m dkrr.cli`` runs the ``dkrr`` command."""

import sys

from ._main import main

sys.exit(main())
