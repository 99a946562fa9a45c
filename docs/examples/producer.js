import { enqueue } from "aws-outbox-relay";
import pg from "pg";

// The service's own pool on the database the relay reads; the relay publishes what commits.
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });

export async function placeOrder(customer, total) {
  const client = await pool.connect();
  try {
    await client.query("begin");
    const { rows } = await client.query("insert into orders (customer, total) values ($1, $2) returning id", [
      customer,
      total,
    ]);
    const orderId = String(rows[0].id);
    await enqueue(client, {
      aggregateType: "order",
      aggregateId: `order-${orderId}`,
      eventType: "order.placed",
      payload: { orderId, customer, total },
    });
    await client.query("commit");
    return orderId;
  } catch (error) {
    await client.query("rollback");
    throw error;
  } finally {
    client.release();
  }
}
