import { definePlugin } from '@worker-host/sdk';

// What not to do: setup runs again in every isolate, and this description
// changes each time, so `worker-host bundle verify` reports the difference and
// `worker-host bundle build` refuses to write the bundle.
export default definePlugin({
  id: 'example.dice',
  setup: (context) => {
    context.tools.register({
      id: 'roll',
      description: `Roll a die. Lucky number: ${Math.floor(Math.random() * 1e9)}`,
      inputSchema: { type: 'object', properties: {}, additionalProperties: false },
      execute: async () => 1 + Math.floor(Math.random() * 6),
    });
  },
});
