"""Loops that wait on an environment (project/env_loops.py), the project view of them
(`ProjectView.env_callers`) and the premise GPU001 and GPU401 ask (analysis/reach.py `off_environment`)."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path
from typing import Optional

from gpulint.project.env_loops import called_from_env, enclosing_key, env_calls, env_named, in_env_loop, is_env_call
from gpulint.project.facts import ImportAliases, facts_of_text, module_imports
from gpulint.project.view import Project
from tests.analysis.test_project import codes, findings, write


def _calls(source: str) -> tuple[str, ...]:
    tree = ast.parse(textwrap.dedent(source))
    imports = module_imports(tree)
    imported = frozenset(ref.local or ref.module.split(".", 1)[0] for ref in imports if ref.name != "*")
    return env_calls(tree, ImportAliases(imports).qualified, imported)


def _call(code: str) -> ast.Call:
    node = ast.parse(code).body[0]
    assert isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
    return node.value


def test_env_names() -> None:
    assert all(env_named(n) for n in ("env", "envs", "eval_env", "train_envs", "env_fn", "ENV"))
    assert not any(env_named(n) for n in ("envelope", "environ", "inventory", "dev", "seven"))


def test_env_calls_need_an_environment_receiver() -> None:
    assert is_env_call(_call("env.step(action)"))
    assert is_env_call(_call("self.env.reset()"))
    assert is_env_call(_call("sim.step(a)"), frozenset({"sim"}))
    assert not is_env_call(_call("env.step()"))  # a step without an action is no transition
    assert not is_env_call(_call("optimizer.step()"))
    assert not is_env_call(_call("scheduler.step(epoch)"))
    assert not is_env_call(_call("env.render()"))


def test_loop_calls_resolved_through_the_file_and_spelled_for_others() -> None:
    found = _calls("""
        import DQN
        import gym
        import numpy as np
        from trainer import train_step


        class Agent:
            def update(self, batch):
                self._learn(batch)

            def _learn(self, batch):
                pass

            def unused(self):
                pass


        def run(buffer):
            env = gym.make("CartPole-v1")
            policy = DQN.DQN(4, 2)
            agent = Agent()
            for t in range(1000):
                obs, reward, done, info = env.step(policy.select_action(np.array(obs)))
                policy.train(buffer)
                agent.update(buffer)
                train_step(buffer)


        def offline(buffer, policy):
            for _ in range(100):
                policy.train(buffer)
    """)
    assert "DQN.DQN#train" in found and "DQN.DQN#select_action" in found and "train_step" in found
    assert {"Agent.update", "Agent._learn"} <= set(found)  # followed through the file's own calls
    assert "Agent.unused" not in found and "offline" not in found and "run" not in found
    assert "#train" not in found  # `offline`'s loop calls no environment


def test_a_loop_that_only_reaches_an_environment_through_a_function_is_not_one() -> None:
    found = _calls("""
        def evaluate(policy, env):
            state, done = env.reset(), False
            while not done:
                state, reward, done, _ = env.step(policy(state))


        def train(policy, buffer, env):
            for it in range(100000):
                policy.update(buffer)
                if it % 5000 == 0:
                    evaluate(policy, env)
    """)
    assert "#update" not in found and "train" not in found


def test_no_env_calls_without_step_or_reset_names() -> None:
    facts = facts_of_text("import torch\nfor x in loader:\n    model(x).sum().backward()\n")
    assert facts is not None and facts.env_calls == ()


def test_enclosing_key_and_env_loop_from_a_node() -> None:
    tree = ast.parse(textwrap.dedent("""
        class Agent:
            def learn(self):
                loss.backward()


        def run(env, agent):
            while True:
                env.step(agent.act())
                loss.backward()
    """))
    parents = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    backwards = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                 and n.func.attr == "backward"]

    def parent(node: ast.AST) -> Optional[ast.AST]:
        return parents.get(id(node))

    def qualified(_: ast.AST) -> set[str]:
        return set()

    assert [enclosing_key(tree, b, parent) for b in backwards] == ["Agent.learn", "run"]
    assert [in_env_loop(tree, b, parent, qualified) for b in backwards] == [False, True]
    assert called_from_env("Agent.learn", frozenset({"*.learn"}))
    assert called_from_env("run", frozenset({"run"}))
    assert not called_from_env("Agent.learn", frozenset({"*.update", "learn"}))


DQN = """\
import torch
import torch.nn as nn


class QNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1024))

    def forward(self, x):
        return self.body(x)


class DQN(object):
    def __init__(self):
        self.Q = QNet().to("cuda")
        self.optimizer = torch.optim.Adam(self.Q.parameters(), fused=True)

    def train(self, buffer):
        states, targets = buffer.sample()
        loss = nn.functional.mse_loss(self.Q(states), targets)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
"""

ONLINE = """\
import DQN


def interact(env, buffer):
    policy = DQN.DQN()
    state = env.reset()
    for t in range(1000000):
        state, reward, done, _ = env.step(0)
        if t % 4 == 0:
            policy.train(buffer)


if __name__ == "__main__":
    interact(make_env(), make_buffer())
"""

OFFLINE = """\
from DQN import DQN


def train_offline(buffer):
    policy = DQN()
    for it in range(100000):
        policy.train(buffer)


if __name__ == "__main__":
    train_offline(load_buffer())
"""


def test_train_step_called_from_another_files_env_loop(tmp_path: Path) -> None:
    """sfujim/BCQ (blind12): DQN.train runs only between two environment transitions of main.py's loop."""
    write(tmp_path / "online", {"DQN.py": DQN, "main.py": ONLINE})
    found = findings(tmp_path / "online", "--select", "GPU001,GPU401")
    assert codes(found, "DQN.py") == []
    root = tmp_path / "online"
    facts = {p: facts_of_text((root / p).read_text()) for p in ("DQN.py", "main.py")}
    project = Project(root, facts)  # type: ignore[arg-type]
    view = project.view(root / "DQN.py")
    assert view is not None and "DQN.train" in view.env_callers


def test_train_step_called_from_an_offline_loop_stays(tmp_path: Path) -> None:
    write(tmp_path / "offline", {"DQN.py": DQN, "main.py": OFFLINE})
    found = findings(tmp_path / "offline", "--select", "GPU001,GPU401")
    assert codes(found, "DQN.py") == ["GPU001", "GPU401"]


# GPU201 asks the same premise of the optimizer's steps: three layers, so more than a handful of tensors
UNFUSED_DQN = DQN.replace("nn.Linear(1024, 1024))", "nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 18))") \
    .replace(", fused=True)", ")")


def test_optimizer_stepped_only_from_another_files_env_loop(tmp_path: Path) -> None:
    """DQN.__init__'s Adam steps only in DQN.train, which main.py calls between environment transitions."""
    write(tmp_path / "online", {"DQN.py": UNFUSED_DQN, "main.py": ONLINE})
    assert codes(findings(tmp_path / "online", "--select", "GPU201"), "DQN.py") == []
    write(tmp_path / "offline", {"DQN.py": UNFUSED_DQN, "main.py": OFFLINE})
    assert codes(findings(tmp_path / "offline", "--select", "GPU201"), "DQN.py") == ["GPU201"]


AGENT = UNFUSED_DQN.replace("class DQN(object):", "class Agent(object):").replace("def train(self, buffer):",
                                                                                  "def update(self, buffer):\n"
                                                                                  "        self.update_q(buffer)\n\n"
                                                                                  "    def update_q(self, buffer):")

HYDRA_WORKSPACE = """\
import hydra


class Workspace:
    def __init__(self, cfg):
        self.train_env = make_env(cfg.task)
        self.agent = hydra.utils.instantiate(cfg.agent)

    def train(self, buffer, frames):
        step, time_step = 0, self.train_env.reset()
        while step < frames:
            self.agent.update(buffer)
            time_step = self.train_env.step(0)
            step += 1


@hydra.main(config_path="cfgs", config_name="config")
def main(cfg):
    Workspace(cfg).train(make_buffer(), cfg.frames)


if __name__ == "__main__":
    main()
"""


def test_optimizer_stepped_from_a_hydra_built_agents_env_loop(tmp_path: Path) -> None:
    """facebookresearch/drqv2 (blind13): train.py builds its agent with `hydra.utils.instantiate` (the class is
    named in a YAML file, so no import leads to agent.py) and calls `self.agent.update(...)` beside
    `self.train_env.step(action)`; the agent's update steps its optimizer through `self.update_q(...)`."""
    write(tmp_path / "online", {"agent.py": AGENT, "train.py": HYDRA_WORKSPACE})
    assert codes(findings(tmp_path / "online", "--select", "GPU201,GPU001,GPU401"), "agent.py") == []
    # checked alone, agent.py's partial project still reads train.py (dispatch/project_scan.py)
    alone = findings(tmp_path / "online", "--select", "GPU201", "--isolated", str(tmp_path / "online" / "agent.py"))
    assert codes(alone, "agent.py") == []
    # without the environment step the same loop is paced by the GPU: reported
    offline = HYDRA_WORKSPACE.replace("            time_step = self.train_env.step(0)\n", "")
    write(tmp_path / "offline", {"agent.py": AGENT, "train.py": offline})
    assert codes(findings(tmp_path / "offline", "--select", "GPU201"), "agent.py") == ["GPU201"]
    # nor is the agent followed from a file that builds it by no configuration: no import leads there
    plain = HYDRA_WORKSPACE.replace("hydra.utils.instantiate(cfg.agent)", "load_agent(cfg.agent)")
    write(tmp_path / "plain", {"agent.py": AGENT, "train.py": plain})
    assert codes(findings(tmp_path / "plain", "--select", "GPU201"), "agent.py") == ["GPU201"]
