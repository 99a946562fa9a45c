/** True when testcontainers finds a working container runtime (takes < 1 s to say no). */
export async function dockerAvailable(): Promise<boolean> {
  if (process.env.OUTBOX_NO_DOCKER === "1") return false;
  const { getContainerRuntimeClient } = await import("testcontainers");
  try {
    await getContainerRuntimeClient();
    return true;
  } catch {
    return false;
  }
}
