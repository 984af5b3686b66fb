// A real OpenID provider for the single sign-on tests (tests/oidc/conftest.py):
// panva's oidc-provider, certified, with its development sign-in page (any
// password), the static users below, one client, and keys made at start.
//
//   node provider.mjs '{"port": 5601, "redirectUri": "...", "postLogoutRedirectUri": "...", "clientSecret": "..."}'
//
// Prints "listening <issuer>" once it takes connections. Test-only: never run
// it anywhere else.
import { generateKeyPairSync } from 'node:crypto';

import Provider from 'oidc-provider';

const { port, redirectUri, postLogoutRedirectUri, clientSecret } = JSON.parse(process.argv[2]);
const issuer = `http://127.0.0.1:${port}`;

// The login name typed on the sign-in page -> the account's claims.
const USERS = {
  olga: { email: 'olga@example.com', email_verified: true, given_name: 'Olga', groups: ['queenadmin-operators', 'staff'] },
  vic: { email: 'vic@example.com', email_verified: true, given_name: 'Vic', groups: ['queenadmin-viewers'] },
  mallory: { email: 'mallory@elsewhere.test', email_verified: true, groups: ['queenadmin-operators'] },
};

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });

const provider = new Provider(issuer, {
  clients: [{
    client_id: 'queenadmin',
    client_secret: clientSecret,
    redirect_uris: [redirectUri],
    post_logout_redirect_uris: [postLogoutRedirectUri],
    grant_types: ['authorization_code'],
    response_types: ['code'],
  }],
  jwks: { keys: [{ ...privateKey.export({ format: 'jwk' }), kid: 'tests', use: 'sig', alg: 'RS256' }] },
  cookies: { keys: ['tests-only-cookie-key'] },
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['given_name', 'family_name'],
    groups: ['groups'],
  },
  scopes: ['openid', 'email', 'profile', 'groups'],
  features: { devInteractions: { enabled: true } },
  async findAccount(ctx, sub) {
    const user = USERS[sub];
    if (!user) return undefined;
    return { accountId: sub, async claims() { return { sub, ...user }; } };
  },
  // A first-party client: consent is implied, no consent page.
  async loadExistingGrant(ctx) {
    const grantId = ctx.oidc.result?.consent?.grantId || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    if (grantId) return ctx.oidc.provider.Grant.find(grantId);
    const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId });
    grant.addOIDCScope('openid email profile groups');
    await grant.save();
    return grant;
  },
});

provider.listen(port, '127.0.0.1', () => {
  console.log(`listening ${issuer}`);
});
