/** Worker-thread entry of the learner (see learner-thread.ts). */
import { parentPort, workerData } from "node:worker_threads";
import { Learner, type LearnerSettings, type LearnerUpdate } from "../learner.js";
import { dispatchLearnerCall, prepareTransfer, type LearnerCall } from "./learner-thread.js";
import type { ExportedWeights } from "@agentrl/policy";
import { describeError } from "./worker.js";

const port = parentPort!;
const { modelDirectory, learner: options } = workerData as {
  modelDirectory: string;
  learner: LearnerSettings;
};

try {
  const learner = await Learner.load(modelDirectory, options);
  // Calls run one at a time, in order.
  let queue = Promise.resolve();
  port.on("message", ({ id, call }: { id: number; call: LearnerCall }) => {
    queue = queue.then(async () => {
      try {
        let result = await dispatchLearnerCall(learner, call);
        let transfer: ArrayBuffer[] = [];
        if (call.method === "update") {
          const update = result as LearnerUpdate;
          if (update.weights) {
            const moved = prepareTransfer(update.weights);
            result = { ...update, weights: moved.weights };
            transfer = moved.transfer;
          }
        } else if (call.method === "exportWeights") {
          ({ weights: result, transfer } = prepareTransfer(result as ExportedWeights));
        }
        port.postMessage({ id, result }, transfer);
      } catch (error) {
        port.postMessage({ id, error: describeError(error) });
      }
    });
  });
  port.postMessage({ ready: true });
} catch (error) {
  port.postMessage({ error: describeError(error) });
}
