import sys

from benchmarks import run

sys.exit(run.main())
