"""The lab: many runs, compared and reported (`python lab/experiment.py --help`). The reference at
the top level trains, samples and evaluates ONE run and never imports this package; the lab imports
it."""
