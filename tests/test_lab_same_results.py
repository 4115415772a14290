"""lab/same_results.py: a setting that only one side knows is left out only at its default."""

from lab import same_results


def test_a_new_setting_at_its_default_is_left_out_and_any_other_value_kept():
    new = {"lr": 1e-3, "train_problems": 0, "pools": {"key": {"run": {"train_problems": 0}}}}
    old = {"lr": 1e-3, "pools": {"key": {"run": {}}}}
    assert same_results.without_new_defaults(new, old) == old
    changed = {**new, "train_problems": 640}
    assert same_results.without_new_defaults(changed, old)["train_problems"] == 640
    # a key both sides know is compared as it is, default or not
    assert same_results.without_new_defaults({"lr": 5e-4}, {"lr": 1e-3}) == {"lr": 5e-4}
