"""
The lab: many runs, compared and reported. The reference at the top level trains, samples and evaluates
ONE run and never imports this package; the lab imports the reference.

    python lab/experiment.py                 # the default experiment (GRPO vs VPO on three tasks)
    python lab/experiment.py --help          # seeds, ablations, --against a committed board, --report
"""
