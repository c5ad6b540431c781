# Makes `allocprof` importable by the tests (pytest puts this file's folder on
# sys.path) and keeps matplotlib headless.
import matplotlib

matplotlib.use("Agg")
