"""`python -m voicehub.cli`: the `voicehub` command without the installed script."""

import sys

from voicehub.cli import main

sys.exit(main())
