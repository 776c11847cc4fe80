/** The Docker runtime of the OS and DB tasks: containers, warm pool, local images, task data location. */
export * from "./runtime.js";
export * from "./pool.js";
export * from "./slots.js";
export * from "./images.js";
export * from "./agentbench.js";
export * from "./failed-session.js";
export * from "./hosts.js";
export * from "./engines.js";
export * from "./engine-images.js";
export * from "./runtime-image.js";
