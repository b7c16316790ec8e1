"""Learning: every algorithm solves CartPole-v1 (mean evaluation return >= 475) within 300k steps.

Hyperparameters are a run's defaults on classic control (``rlhelpers.core.config.ENV_DEFAULTS`` on top of each
algorithm's own pg/vf coefficients; docs/experiment.md#defaults): 8 envs, n_steps 5, lr 7e-3, ent_coef 0,
gamma 0.99, grad clip 0.5, TF RMSprop. Evaluation: 10 stochastic-policy episodes every 10k steps.
"""

import pytest

from rlhelpers.core.evaluation import mean_return
from rlhelpers.runner.config import TrainConfig
from rlhelpers.runner.run import train


@pytest.mark.parametrize("algo", ["a2c", "task1", "task2"])
def test_solves_cartpole(algo: str, tmp_path) -> None:
    config = TrainConfig(algo=algo, seed=0, env_id="CartPole-v1", total_timesteps=300_000, n_eval_episodes=10,
                         n_eval_envs=10, runs_dir=str(tmp_path), wandb_mode="disabled", device="cpu")
    assert config.stop_return == 475.0 and config.n_envs == 8
    result = train(config, show_progress=False)
    best = max(mean_return(point) for point in result.eval_history)
    print(f"{algo}: best mean evaluation return {best:.1f}, stopped at step {result.num_timesteps:,}")
    assert result.stop_reason == "stop_return"
    assert best >= 475.0
    assert result.num_timesteps <= 300_000
