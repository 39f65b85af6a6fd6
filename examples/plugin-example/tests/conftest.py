import sys
from pathlib import Path

# Run in place, without installing: the package sits beside this folder.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
