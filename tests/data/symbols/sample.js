// Client for the API.
export class Client {
  #secret = 1;
  constructor(url) {
    this.url = url;
  }
  /** Send a message. */
  async send(msg) {
    const encode = (m) => JSON.stringify(m);
    return encode(msg);
  }
  #sign() {}
  handler = () => {
    return 1;
  };
  static create() { return new Client(); }
}

export function connect(url) {
  function retry() {}
  return new Client(url);
}

const helpers = {
  format(x) { return x; },
  parse: function (s) { return s; },
};

module.exports.util = function () {};
function* gen() {}
export default class {}
