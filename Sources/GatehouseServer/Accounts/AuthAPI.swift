import Foundation
import GatehouseAPI
import OpenAPIRuntime

// `/auth/v1`, in Supabase Auth's wire format. One of its quirks is not the generated code's to answer: errors take
// GoTrue's legacy shape unless the client sends `X-Supabase-Api-Version` (`APIError.response` chooses). The mailed
// link's page and its button are page routes (`LinkPageRoutes`).

extension API {
    // MARK: Sign-up and mailed codes

    func signUp(_ input: Operations.SignUp.Input) async throws -> Operations.SignUp.Output {
        let client = try access.client()
        switch input.body {
        case .json(let body):
            switch try await signUps.signUp(body, redirectTo: input.query.redirectTo, client: client) {
            case .user(let user): return .ok(.init(body: .json(.User(user))))
            case .anonymous(let session): return .ok(.init(body: .json(.Session(session))))
            }
        }
    }

    func sendOTP(_ input: Operations.SendOTP.Input) async throws -> Operations.SendOTP.Output {
        let client = try access.client()
        switch input.body {
        case .json(let body): try await signUps.sendOTP(body, redirectTo: input.query.redirectTo, client: client)
        }
        return .ok(.init(body: .json(.init())))
    }

    func resend(_ input: Operations.Resend.Input) async throws -> Operations.Resend.Output {
        let client = try access.client()
        switch input.body {
        case .json(let body): try await signUps.resend(body, redirectTo: nil, client: client)
        }
        return .ok(.init(body: .json(.init())))
    }

    func recover(_ input: Operations.Recover.Input) async throws -> Operations.Recover.Output {
        let client = try access.client()
        switch input.body {
        case .json(let body): try await signUps.recover(body, redirectTo: input.query.redirectTo, client: client)
        }
        return .ok(.init(body: .json(.init())))
    }

    // MARK: Verification

    func verify(_ input: Operations.Verify.Input) async throws -> Operations.Verify.Output {
        let client = try access.client()
        switch input.body {
        case .json(let body):
            switch try await verification.verify(body, client: client) {
            case .session(let session): return .ok(.init(body: .json(.Session(session))))
            case .confirmedOnce:
                return .ok(
                    .init(
                        body: .json(
                            .ConfirmationAccepted(.init(msg: VerificationService.confirmedOnceMessage, code: ._200)))))
            }
        }
    }

    // MARK: Tokens

    /// The body's shape is chosen by `grant_type` (the document's `oneOf`): a body of another grant is refused.
    /// The refresh grant, sent and answered as JSON, has a fast path: `FastPath.refresh` (`AuthFastPaths.swift`).
    func token(_ input: Operations.Token.Input) async throws -> Operations.Token.Output {
        let client = try access.client()
        let session: Schemas.Session
        switch (input.query.grantType, input.body) {
        case (.password, .json(.PasswordGrant(let body))): session = try await tokens.password(body, client: client)
        case (.refreshToken, .json(.RefreshGrant(let body))): session = try await tokens.refresh(body, client: client)
        case (.idToken, .json(.IDTokenGrant(let body))):
            // Linking (`link_identity`) acts for the bearer's account; a sign-in needs no bearer.
            let caller = body.linkIdentity == true ? try await access.account() : nil
            session = try await tokens.idToken(body, linkingTo: caller, client: client)
        case (.pkce, .json(.PKCEGrant(let body))): session = try await tokens.pkce(body, client: client)
        default:
            throw APIError.badJSON("The body does not hold what grant_type=\(input.query.grantType.rawValue) needs")
        }
        return .ok(.init(body: .json(session)))
    }

    // MARK: Signed in

    /// Answered as JSON, this has a fast path: `FastPath.user` (`AuthFastPaths.swift`).
    func getUser(_ input: Operations.GetUser.Input) async throws -> Operations.GetUser.Output {
        .ok(.init(body: .json(try await profiles.user(try await access.account()))))
    }

    func updateUser(_ input: Operations.UpdateUser.Input) async throws -> Operations.UpdateUser.Output {
        let caller = try await access.account()
        switch input.body {
        case .json(let body): return .ok(.init(body: .json(try await profiles.update(body, by: caller))))
        }
    }

    /// GoTrue's unlink: the identity's `identity_id`, 200 `{}`.
    func unlinkIdentity(_ input: Operations.UnlinkIdentity.Input) async throws -> Operations.UnlinkIdentity.Output {
        try await external.unlink(identityID: input.path.identityId, by: try await access.account())
        return .ok(.init(body: .json(.init())))
    }

    /// Sign in with Apple's server-to-server notifications: Apple's body, trusted by its signature only.
    func appleSignInNotification(_ input: Operations.AppleSignInNotification.Input) async throws
        -> Operations.AppleSignInNotification.Output
    {
        let client = try access.client()
        switch input.body {
        case .json(let body): try await appleNotifications.receive(body.payload, client: client)
        }
        return .ok(.init(body: .json(.init())))
    }

    func reauthenticate(_ input: Operations.Reauthenticate.Input) async throws -> Operations.Reauthenticate.Output {
        try await profiles.reauthenticate(try await access.account())
        return .ok(.init(body: .json(.init())))
    }

    /// Any session may sign out, a company session included.
    func logout(_ input: Operations.Logout.Input) async throws -> Operations.Logout.Output {
        let scope = SessionService.Scope(rawValue: (input.query.scope ?? .global).rawValue) ?? .global
        try await accountSessions.logout(scope, by: try await access.session())
        return .noContent(.init())
    }

    // MARK: Public information

    func getSettings(_ input: Operations.GetSettings.Input) async throws -> Operations.GetSettings.Output {
        let settings = Schemas.Settings(
            external: .init(
                email: true, apple: external.providers.enabled("apple"), google: external.providers.enabled("google"),
                phone: false, anonymousUsers: verification.settings.anonymousUsers, azure: false, bitbucket: false,
                discord: false, facebook: false, figma: false, fly: false, github: false, gitlab: false, kakao: false,
                keycloak: false, linkedin: false, linkedinOidc: false, notion: false, slack: false, slackOidc: false,
                snapchat: false, spotify: false, twitch: false, twitter: false, workos: false, zoom: false),
            disableSignup: false,
            mailerAutoconfirm: false, phoneAutoconfirm: false, smsProvider: "", samlEnabled: false,
            customProviders: try await customProviders.signInProviders())
        return .ok(.init(body: .json(settings)))
    }

    func getJWKS(_ input: Operations.GetJWKS.Input) async throws -> Operations.GetJWKS.Output {
        let keys = try await keys.jwks()
        return .ok(.init(body: .json(try JSONDecoder().decode(Schemas.Jwks.self, from: JSONEncoder().encode(keys)))))
    }
}
