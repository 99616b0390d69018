#if canImport(AuthenticationServices) && (os(iOS) || os(macOS) || os(visionOS))
    import AuthenticationServices
    import Foundation

    /// Sign in with Apple through the system's sheet (`ASAuthorizationController`), asking for the name and email.
    /// The app needs the Sign in with Apple capability, and the server its bundle id in `--apple-audiences`.
    public struct PlatformAppleIDAuthorizer: AppleIDAuthorizer {
        private let anchor: @MainActor @Sendable () -> ASPresentationAnchor

        /// An authorizer that shows the system's sheet over the window `presentationAnchor` answers.
        public init(presentationAnchor: @escaping @MainActor @Sendable () -> ASPresentationAnchor) {
            anchor = presentationAnchor
        }

        /// Runs one Apple ID request carrying `hashedNonce`.
        public func authorize(hashedNonce: String) async throws -> AppleIDAuthorization {
            try await AppleIDCeremony.authorize(hashedNonce: hashedNonce, anchor: anchor)
        }
    }

    /// The Apple ID request, made on the main actor and run by `AuthorizationCeremony`, as passkeys are: the
    /// credential is read there, so only an `AppleIDAuthorization` leaves it.
    @MainActor
    private enum AppleIDCeremony {
        static func authorize(
            hashedNonce: String, anchor: @MainActor @Sendable () -> ASPresentationAnchor
        ) async throws -> AppleIDAuthorization {
            let request = ASAuthorizationAppleIDProvider().createRequest()
            request.requestedScopes = [.fullName, .email]
            request.nonce = hashedNonce
            return try await AuthorizationCeremony.run(request, anchor: anchor(), read: authorization(of:))
        }

        /// What Apple gave: the token and the code are UTF-8 bytes; the name comes only the first time.
        private static func authorization(of credential: any ASAuthorizationCredential) throws -> AppleIDAuthorization {
            guard let apple = credential as? ASAuthorizationAppleIDCredential else {
                throw PasskeyAuthenticatorError.failed("The system answered with another kind of credential")
            }
            guard let token = apple.identityToken.flatMap({ String(data: $0, encoding: .utf8) }) else {
                throw PasskeyAuthenticatorError.failed("Apple gave no identity token")
            }
            return AppleIDAuthorization(
                identityToken: token,
                authorizationCode: apple.authorizationCode.flatMap { String(data: $0, encoding: .utf8) },
                fullName: apple.fullName)
        }
    }
#endif
