"""Disease-progression regressor on the sklearn diabetes table, mlcore loop."""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F
from sklearn.datasets import load_diabetes
from sklearn.model_selection import train_test_split
from torch.distributed.elastic.multiprocessing.errors import record

from mlcore import World, rank_zero_only, world_session
from mlcore.loop import batched, broadcast_parameters, train_steps
from mlcore.metrics import Mean, MeanAbsoluteError

P = {"hidden": 64, "epochs": 60, "batch": 16, "lr": 3e-3, "seed": 21}
log = logging.getLogger("diabetes")


@rank_zero_only
def report(val_mae: MeanAbsoluteError, train_loss: float, y_scale: float):
    log.info("final train mse %.4f | val MAE %.2f (target units)", train_loss, val_mae.compute() * y_scale)


@record
def main():
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    with world_session(timeout_s=30) as world:
        X, y = load_diabetes(return_X_y=True)
        Xtr, Xva, ytr, yva = train_test_split(X, y, test_size=0.25, random_state=P["seed"])
        mu, sd = ytr.mean(), ytr.std()
        to_t = lambda a: torch.tensor(a, dtype=torch.float32)
        Xtr, Xva, ytr, yva = to_t(Xtr), to_t(Xva), to_t((ytr - mu) / sd), to_t((yva - mu) / sd)
        Xtr, ytr = Xtr[world.ordinal::world.size], ytr[world.ordinal::world.size]
        Xva, yva = Xva[world.ordinal::world.size], yva[world.ordinal::world.size]

        torch.manual_seed(P["seed"])
        model = nn.Sequential(nn.Linear(10, P["hidden"]), nn.Tanh(), nn.Linear(P["hidden"], 1))
        broadcast_parameters(model)
        opt = torch.optim.Adam(model.parameters(), lr=P["lr"])

        def mse(m, idx):
            return F.mse_loss(m(Xtr[idx]).squeeze(-1), ytr[idx])

        loss = Mean()
        for epoch in range(P["epochs"]):
            loss = Mean()
            for rec in train_steps(model, opt, batched(len(ytr), P["batch"], seed=P["seed"], epoch=epoch), mse):
                loss.update(rec["loss"])
            if epoch % 20 == 0:
                train_mse = loss.compute()
                if world.coordinator:
                    log.info("epoch %d train mse %.4f", epoch, train_mse)

        mae = MeanAbsoluteError()
        with torch.no_grad():
            mae.update(model(Xva).squeeze(-1), yva)
        report(mae, loss.compute(sync=False), float(sd))
        world.barrier()  # keep workers alive until the coordinator has logged


if __name__ == "__main__":
    main()
