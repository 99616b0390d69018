#if canImport(AuthenticationServices) && (os(iOS) || os(macOS) || os(visionOS))
    import AuthenticationServices
    import Foundation

    /// One `ASAuthorizationController` run, its delegate bridged to async, for the passkey and Sign in with Apple
    /// adapters: `read` turns the credential into an `Answer` on the main actor, so only the `Answer` leaves it. The
    /// controller holds its delegate weakly; the running method holds the ceremony, and the ceremony the controller.
    // The delegate methods sit in the class body: an extension of a generic class cannot hold `@objc` members.
    @MainActor
    final class AuthorizationCeremony<Answer: Sendable>: NSObject, ASAuthorizationControllerDelegate,
        ASAuthorizationControllerPresentationContextProviding
    {
        private let anchor: ASPresentationAnchor
        private let read: @MainActor (any ASAuthorizationCredential) throws -> Answer
        private var controller: ASAuthorizationController?
        private var continuation: CheckedContinuation<Answer, any Error>?

        private init(
            anchor: ASPresentationAnchor, read: @escaping @MainActor (any ASAuthorizationCredential) throws -> Answer
        ) {
            self.anchor = anchor
            self.read = read
        }

        /// Shows the system's sheet for `request` over `anchor` and answers what `read` makes of the credential, or
        /// throws `PasskeyAuthenticatorError` (`cancelled` when the sheet is dismissed or the task cancelled).
        static func run(
            _ request: ASAuthorizationRequest, anchor: ASPresentationAnchor,
            read: @escaping @MainActor (any ASAuthorizationCredential) throws -> Answer
        ) async throws -> Answer {
            try await AuthorizationCeremony(anchor: anchor, read: read).run(request)
        }

        private func run(_ request: ASAuthorizationRequest) async throws -> Answer {
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    self.continuation = continuation
                    let controller = ASAuthorizationController(authorizationRequests: [request])
                    controller.delegate = self
                    controller.presentationContextProvider = self
                    self.controller = controller
                    controller.performRequests()
                }
            } onCancel: {
                // The sheet closes and the delegate hears `canceled`.
                Task { @MainActor in self.controller?.cancel() }
            }
        }

        private func finish(_ answer: () throws -> Answer) {
            continuation?.resume(with: Result(catching: answer))
            continuation = nil
            controller = nil
        }

        /// What the system's error means to the app: a dismissed sheet is `cancelled`, a passkey the user already has
        /// is `credentialExcluded` (only a passkey registration with an exclude list hears that).
        private static func reason(for error: any Error) -> PasskeyAuthenticatorError {
            guard let error = error as? ASAuthorizationError else { return .failed(error.localizedDescription) }
            if error.code == .canceled { return .cancelled }
            if #available(iOS 18, macOS 15, visionOS 2, *), error.code == .matchedExcludedCredential {
                return .credentialExcluded
            }
            return .failed(error.localizedDescription)
        }

        func authorizationController(
            controller: ASAuthorizationController, didCompleteWithAuthorization authorization: ASAuthorization
        ) {
            finish { try read(authorization.credential) }
        }

        func authorizationController(controller: ASAuthorizationController, didCompleteWithError error: any Error) {
            finish { throw Self.reason(for: error) }
        }

        func presentationAnchor(for controller: ASAuthorizationController) -> ASPresentationAnchor { anchor }
    }
#endif
